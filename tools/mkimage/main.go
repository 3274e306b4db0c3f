// Command mkimage assembles drainwatch's OCI image from binaries already
// built (make image builds them): no container engine, fixed timestamps, the
// same digest for the same binaries.
//
//	mkimage --bin amd64=bin/linux_amd64/drainwatch --version v0.3.0 \
//	        --revision $(git rev-parse HEAD) --created $(git log -1 --format=%ct) --out bin
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/drainwatch/drainwatch/tools/oci"
)

// binFlags collects repeated --bin arch=path.
type binFlags map[string]string

func (b binFlags) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binFlags) Set(v string) error {
	arch, path, ok := strings.Cut(v, "=")
	if !ok || arch == "" || path == "" {
		return fmt.Errorf("--bin %q: want ARCH=PATH", v)
	}
	b[arch] = path
	return nil
}

func main() {
	bins, apiservers := binFlags{}, binFlags{}
	c := oci.Config{}
	var created int64
	var out, repo string
	flag.Var(bins, "bin", "ARCH=PATH of a static linux binary (repeatable)")
	flag.Var(apiservers, "apiserver-bin", "ARCH=PATH of its drainwatch-apiserver (repeatable)")
	flag.StringVar(&c.Version, "version", "dev", "image version label and tag")
	flag.StringVar(&c.Revision, "revision", "", "git commit of the build")
	flag.StringVar(&c.Source, "source", "https://github.com/drainwatch/drainwatch", "source repository URL")
	flag.Int64Var(&created, "created", 0, "creation time, unix seconds (the commit's time)")
	flag.StringVar(&out, "out", "bin", "output directory")
	flag.StringVar(&repo, "repo", "ghcr.io/drainwatch/drainwatch", "image repository the layout names")
	flag.Parse()
	c.Binaries, c.APIServers, c.Created = bins, apiservers, time.Unix(created, 0)
	if err := run(c, out, repo+":"+c.Version); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(c oci.Config, out, ref string) error {
	idx, err := oci.Build(c)
	if err != nil {
		return err
	}
	o := oci.Outputs(out, c.Arches())
	if err := oci.Write(o, idx, ref); err != nil {
		return err
	}
	return describe(idx, o, ref)
}

// describe prints what make image's output promises: each image's digest
// and size, and where the files are.
func describe(idx v1.ImageIndex, o oci.Output, ref string) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image %s\n  index  %s\n", ref, d)
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		size, err := oci.CompressedSize(img)
		if err != nil {
			return err
		}
		fmt.Printf("  linux/%-6s %s  %d bytes compressed  %s\n", m.Platform.Architecture, m.Digest, size, o.Tarball[m.Platform.Architecture])
	}
	fmt.Printf("  layout %s\n  archive %s\n", o.Layout, o.Archive)
	return nil
}
