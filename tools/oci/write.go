package oci

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Output names the files Write produces.
type Output struct {
	Layout  string            // OCI image layout directory
	Archive string            // the same layout as one tar
	Tarball map[string]string // per GOARCH: docker-style tarball of that image
}

// Outputs returns the file names under dir: drainwatch-oci/,
// drainwatch-oci.tar and drainwatch-linux-<arch>.tar.
func Outputs(dir string, arches []string) Output {
	o := Output{
		Layout:  filepath.Join(dir, "drainwatch-oci"),
		Archive: filepath.Join(dir, "drainwatch-oci.tar"),
		Tarball: map[string]string{},
	}
	for _, a := range arches {
		o.Tarball[a] = filepath.Join(dir, "drainwatch-linux-"+a+".tar")
	}
	return o
}

// Write writes idx as o.Layout (index.json pointing at idx, named ref),
// o.Archive and one tarball per architecture, replacing older ones.
func Write(o Output, idx v1.ImageIndex, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := os.RemoveAll(o.Layout); err != nil {
		return err
	}
	lp, err := layout.Write(o.Layout, empty.Index)
	if err != nil {
		return fmt.Errorf("writing %s: %w", o.Layout, err)
	}
	err = lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	}))
	if err != nil {
		return fmt.Errorf("writing %s: %w", o.Layout, err)
	}
	if err := archiveDir(o.Archive, o.Layout); err != nil {
		return err
	}
	return writeTarballs(o, idx, tag)
}

func writeTarballs(o Output, idx v1.ImageIndex, tag name.Tag) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		path, ok := o.Tarball[d.Platform.Architecture]
		if !ok {
			continue
		}
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// archiveDir tars dir into path with sorted entries, root ownership and a
// zero mtime, so the archive is as reproducible as its content.
func archiveDir(path, dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Strings(names)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		if err := addFile(tw, dir, p); err != nil {
			f.Close()
			return fmt.Errorf("archiving %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, dir, p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(dir, p)
	h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0).UTC(), Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: st.Size()}
	if st.IsDir() {
		h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil || st.IsDir() {
		return err
	}
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}
