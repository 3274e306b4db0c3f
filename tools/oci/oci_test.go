package oci

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func testConfig(t *testing.T) Config {
	bin := filepath.Join(t.TempDir(), "drainwatch")
	if err := os.WriteFile(bin, []byte("\x7fELF not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Config{
		Binaries: map[string]string{"amd64": bin, "arm64": bin},
		Version:  "v1.2.3", Revision: "abc123", Source: "https://github.com/drainwatch/drainwatch",
		Created: time.Unix(1700000000, 0),
	}
}

// TestReproducible: two builds from the same binaries, at different wall
// times, give the same index digest and byte-identical files.
func TestReproducible(t *testing.T) {
	c := testConfig(t)
	first := writeAll(t, c)
	time.Sleep(1100 * time.Millisecond) // a second apart: no wall clock may leak in
	second := writeAll(t, c)
	if len(first) != 4 {
		t.Fatalf("%d files hashed, want 4 (index.json, archive, two tarballs)", len(first))
	}
	for name, sum := range first {
		if second[name] != sum {
			t.Errorf("%s differs between two builds: %s vs %s", name, sum, second[name])
		}
	}
}

// writeAll builds and writes the image into a fresh directory and returns
// the sha256 of each top-level file.
func writeAll(t *testing.T, c Config) map[string]string {
	t.Helper()
	idx, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := Outputs(dir, c.Arches())
	if err := Write(o, idx, "ghcr.io/drainwatch/drainwatch:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, p := range []string{filepath.Join(o.Layout, "index.json"), o.Archive, o.Tarball["amd64"], o.Tarball["arm64"]} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		sums[filepath.Base(p)] = hex.EncodeToString(s[:])
	}
	return sums
}

// TestContent: the layout holds one index named by the tag, with one image
// per architecture whose config has the entrypoint, labels and platform,
// and whose only layer holds the binary and nothing but its few files.
func TestContent(t *testing.T) {
	c := testConfig(t)
	idx, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	o := Outputs(t.TempDir(), c.Arches())
	if err := Write(o, idx, "ghcr.io/drainwatch/drainwatch:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.ImageIndexFromPath(o.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, _ := lp.IndexManifest()
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Fatalf("index.json: %+v, want one index named v1.2.3", top.Manifests)
	}
	inner, err := lp.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := inner.IndexManifest()
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("platforms: %+v, want amd64 then arm64", im.Manifests)
	}
	for _, m := range im.Manifests {
		img, err := inner.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		if cf.Architecture != m.Platform.Architecture || cf.OS != "linux" || cf.Config.Entrypoint[0] != BinaryPath || !cf.Created.Equal(c.Created) {
			t.Fatalf("config %+v", cf)
		}
		// The CLI runs as nonroot; the DaemonSet sets runAsUser 0.
		if cf.Config.User != "65532:65532" {
			t.Errorf("image USER %q, want 65532:65532 (nonroot)", cf.Config.User)
		}
		for k, v := range map[string]string{"org.opencontainers.image.version": "v1.2.3", "org.opencontainers.image.revision": "abc123",
			"org.opencontainers.image.source": c.Source, "org.opencontainers.image.licenses": "Apache-2.0"} {
			if cf.Config.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
			}
		}
		layers, _ := img.Layers()
		if len(layers) != 1 {
			t.Fatalf("%d layers, want 1", len(layers))
		}
		checkLayer(t, layers[0], c)
	}
}

func checkLayer(t *testing.T, l interface{ Uncompressed() (io.ReadCloser, error) }, c Config) {
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	want, _ := os.ReadFile(c.Binaries["amd64"])
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(c.Created) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want %v, 0, 0", h.Name, h.ModTime, h.Uid, h.Gid, c.Created)
		}
		if h.Name == "usr/bin/drainwatch" {
			got, _ := io.ReadAll(tr)
			if !bytes.Equal(got, want) || h.Mode != 0o755 {
				t.Errorf("binary: %d bytes mode %o, want the %d bytes given, 0755", len(got), h.Mode, len(want))
			}
		}
	}
	if len(names) != 11 {
		t.Errorf("layer holds %d entries %q, want the 11 of rootfs", len(names), names)
	}
}
