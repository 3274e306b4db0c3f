package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"

	"github.com/drainwatch/drainwatch/tools/oci"
)

// File is a host file copied into an image, at Path (absolute) in the
// image; symlinks on the host are followed (the image gets a regular file).
type File struct {
	Path, Host string
}

// HostBinaries are the host's dynamically linked programs at their paths
// (e.g. /usr/sbin/nginx, /bin/sh) with the shared libraries ldd resolves
// for them and the dynamic loader: what Debian's nginx or dash need to run
// in an image without the rest of Debian.
func HostBinaries(bins ...string) ([]File, error) {
	var files []File
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, File{Path: p, Host: p})
		}
	}
	for _, bin := range bins {
		add(bin)
		libs, err := sharedLibraries(bin)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			add(l)
		}
	}
	return files, nil
}

// sharedLibraries are the absolute paths ldd prints for bin ("lib =>
// /path (addr)" and the loader's "/path (addr)").
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
				break
			}
		}
	}
	return libs, nil
}

// fileEntries are the layer entries of files: each parent directory once,
// then the files, with the host file's mode.
func fileEntries(files []File) ([]oci.Entry, error) {
	var dirs []string
	for _, f := range files {
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	slices.Sort(dirs) // parents sort before their children
	var entries []oci.Entry
	for _, d := range dirs {
		entries = append(entries, oci.Entry{Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, Dir: true})
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Host)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", f.Path, err)
		}
		st, err := os.Stat(f.Host)
		if err != nil {
			return nil, err
		}
		entries = append(entries, oci.Entry{Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(st.Mode().Perm()), Data: data})
	}
	return entries, nil
}
