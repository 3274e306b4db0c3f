// Package oci builds drainwatch's container image without a container
// engine: one layer holding the static binary at /usr/bin/drainwatch and the
// passwd/group files a non-root run needs, labelled, with fixed timestamps so
// the same binaries always give the same digest.
//
// The result is written three ways under bin/ (see Write): an OCI image
// layout directory, the same layout as one tar (an "OCI archive"), and one
// docker-style tarball per architecture.
//
// tools/mkimage (make image) is its command; testenv/realnode builds its
// images' layers with Layer, and testenv/runtime's test the image itself.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryPath is where the image holds the daemon, and its entrypoint.
const BinaryPath = "/usr/bin/drainwatch"

// APIServerPath is where the image holds drainwatch-apiserver (the chart's
// apiServer Deployment runs it as its command).
const APIServerPath = "/usr/bin/drainwatch-apiserver"

// Config is what an image is made of. Binaries maps a GOARCH to the path of
// a static linux binary built for it, APIServers (optional) to the path of
// its drainwatch-apiserver; every other field is metadata.
type Config struct {
	Binaries   map[string]string
	APIServers map[string]string
	Version  string // org.opencontainers.image.version
	Revision string // org.opencontainers.image.revision (git commit)
	Source   string // org.opencontainers.image.source (repository URL)
	// Created is the image's creation time, and the mtime of every file in
	// the layer: the commit's time, so a rebuild gives the same digest.
	Created time.Time
}

// Labels are the image's OCI labels.
func (c Config) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "drainwatch",
		"org.opencontainers.image.version":  c.Version,
		"org.opencontainers.image.revision": c.Revision,
		"org.opencontainers.image.source":   c.Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  c.Created.UTC().Format(time.RFC3339),
	}
}

// Arches returns the configured architectures, sorted.
func (c Config) Arches() []string {
	var arches []string
	for a := range c.Binaries {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	return arches
}

// Build returns the multi-architecture index, one image per binary.
func Build(c Config) (v1.ImageIndex, error) {
	if len(c.Binaries) == 0 {
		return nil, fmt.Errorf("no binary to put in the image")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range c.Arches() {
		img, err := BuildImage(c, arch)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	return idx, nil
}

// BuildImage returns the image for one architecture.
func BuildImage(c Config, arch string) (v1.Image, error) {
	bin, err := os.ReadFile(c.Binaries[arch])
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", arch, err)
	}
	var apiserver []byte
	if path, ok := c.APIServers[arch]; ok {
		if apiserver, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("reading the %s drainwatch-apiserver: %w", arch, err)
		}
	}
	layerTar, err := rootfs(bin, apiserver, c.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: c.Created.UTC()}
	cf.Author = "drainwatch"
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "drainwatch tools/mkimage", Comment: "static drainwatch binary"}}
	cf.Config = v1.Config{
		// Non-root by default: the CLI (timeline, rollout, advise, doctor
		// without eBPF) needs no privilege. The DaemonSet sets runAsUser 0
		// for its capabilities (deploy/daemonset/base/daemonset.yaml).
		User:       NonRootUser,
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"help"},
		Env:        []string{"PATH=/usr/bin"},
		Labels:     c.Labels(),
		WorkingDir: "/",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the %s config: %w", arch, err)
	}
	return img, nil
}

// NonRootUser is the image's USER: nonroot of Passwd.
const NonRootUser = "65532:65532"

// Passwd and Group let an image run as root (what the DaemonSet does, for
// its capabilities) or as nonroot 65532 (timeline, doctor without eBPF).
const (
	Passwd = "root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"
	Group  = "root:x:0:\nnonroot:x:65532:\n"
)

// rootfs is the layer's tar: directories, passwd, group and the binaries
// (drainwatch-apiserver when given), every entry owned by root with the
// fixed mtime.
func rootfs(bin, apiserver []byte, mtime time.Time) ([]byte, error) {
	entries := []Entry{
		{Name: "etc/", Mode: 0o755, Dir: true},
		{Name: "etc/group", Mode: 0o644, Data: []byte(Group)},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(Passwd)},
		// The DaemonSet's mount points, so a read-only root needs none created.
		{Name: "sys/", Mode: 0o555, Dir: true},
		{Name: "tmp/", Mode: 0o1777, Dir: true},
		{Name: "usr/", Mode: 0o755, Dir: true},
		{Name: "usr/bin/", Mode: 0o755, Dir: true},
		{Name: "usr/bin/drainwatch", Mode: 0o755, Data: bin},
	}
	if apiserver != nil {
		entries = append(entries, Entry{Name: "usr/bin/drainwatch-apiserver", Mode: 0o755, Data: apiserver})
	}
	return Layer(append(entries,
		Entry{Name: "var/", Mode: 0o755, Dir: true},
		Entry{Name: "var/lib/", Mode: 0o755, Dir: true},
		Entry{Name: "var/lib/drainwatch/", Mode: 0o700, Dir: true},
	), mtime)
}

// Entry is one file or directory of a layer.
type Entry struct {
	Name string // relative, directories end in "/"
	Mode int64
	Data []byte
	Dir  bool
}

// Layer is the tar of entries, in order, every one owned by root with
// mtime: the same entries give the same bytes (reproducible digests).
func Layer(entries []Entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, ModTime: mtime.UTC(), Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(e.Data)), Uname: "root", Gname: "root"}
		if e.Dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.Name, err)
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CompressedSize is what a registry stores for img: manifest, config and
// compressed layers.
func CompressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
