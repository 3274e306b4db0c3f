package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/drainwatch/drainwatch/testenv/gobuild"
	"github.com/drainwatch/drainwatch/tools/oci"
)

// PauseImage is the sandbox image every real node gets (containerd's
// sandbox_image): testenv/realnode/pause, built static.
const PauseImage = "testenv.local/pause:1"

// Image is a one-binary image built locally and imported into the node's
// containerd; pods name it by Ref with imagePullPolicy Never (there is no
// registry).
type Image struct {
	Ref    string // e.g. "testenv.local/dwserver:1"
	Binary string // a static linux binary, at /usr/bin/<base name> in the image; may be empty
	// Files are host files added at their paths (HostBinaries: a Debian
	// program with its libraries).
	Files []File
	// Entrypoint defaults to the binary alone.
	Entrypoint []string
	StopSignal string // image config STOPSIGNAL; empty: none (containerd sends SIGTERM)
	User       string // image config User; empty: root
}

// StaticImage builds the module's main package pkg with cgo off into dir
// and returns an image of it named ref.
func StaticImage(ctx context.Context, pkg, dir, ref string) (Image, error) {
	bin, err := gobuild.Static(ctx, pkg, dir, filepath.Base(pkg)+"-static")
	if err != nil {
		return Image{}, err
	}
	return Image{Ref: ref, Binary: bin, Entrypoint: []string{"/usr/bin/" + filepath.Base(bin)}}, nil
}

// buildImage makes the image: one layer (passwd, group, tmp, the binary)
// and a real config.
func buildImage(im Image) (v1.Image, error) {
	layerTar, err := layer(im)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Ref, err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image %s layer: %w", im.Ref, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	entry := im.Entrypoint
	if len(entry) == 0 {
		entry = []string{"/usr/bin/" + filepath.Base(im.Binary)}
	}
	cf.Config = v1.Config{Entrypoint: entry, Env: []string{"PATH=/usr/bin"}, WorkingDir: "/",
		StopSignal: im.StopSignal, User: im.User}
	return mutate.ConfigFile(img, cf)
}

// layer is the image's one layer: the directories a pod needs, passwd and
// group, the binary as /usr/bin/<base name> and the host files, dated at
// the epoch.
func layer(im Image) ([]byte, error) {
	entries := []oci.Entry{
		{Name: "etc/", Mode: 0o755, Dir: true},
		{Name: "etc/group", Mode: 0o644, Data: []byte(oci.Group)},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(oci.Passwd)},
		{Name: "tmp/", Mode: 0o1777, Dir: true},
	}
	files := im.Files
	if im.Binary != "" {
		files = append([]File{{Path: "/usr/bin/" + filepath.Base(im.Binary), Host: im.Binary}}, files...)
	}
	more, err := fileEntries(files)
	if err != nil {
		return nil, err
	}
	for _, e := range more {
		if e.Name != "etc/" && e.Name != "tmp/" {
			entries = append(entries, e)
		}
	}
	return oci.Layer(entries, time.Unix(0, 0))
}

// importImages writes each image as a docker-archive tarball and imports it
// into the CRI's containerd namespace with ctr.
func (n *Node) importImages(ctx context.Context, images []Image) error {
	for _, im := range images {
		img, err := buildImage(im)
		if err != nil {
			return err
		}
		tag, err := name.NewTag(im.Ref)
		if err != nil {
			return fmt.Errorf("image ref %s: %w", im.Ref, err)
		}
		path := filepath.Join(n.Dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(im.Ref)+".tar")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if out, err := n.Ctr(ctx, "images", "import", path); err != nil {
			return fmt.Errorf("importing %s: %w: %s", im.Ref, err, out)
		}
	}
	return nil
}
