package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is the resident memory, in KiB, of one kind of mapping of a
// process (see mappingKind), summed over /proc/<pid>/smaps.
type Mapping struct {
	Kind           string
	RSS, Anon, PSS int
}

// SmapsBreakdown reads /proc/<pid>/smaps, copies it to save (when not
// empty) and sums Rss, Anonymous and Pss per kind of mapping, largest
// first: what a container's working set is made of.
func SmapsBreakdown(pid int, save string) ([]Mapping, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps"))
	if err != nil {
		return nil, fmt.Errorf("reading the daemon's smaps: %w", err)
	}
	if save != "" {
		if err := os.WriteFile(save, raw, 0o644); err != nil {
			return nil, fmt.Errorf("saving the daemon's smaps: %w", err)
		}
	}
	exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	return sumSmaps(strings.NewReader(string(raw)), exe)
}

// sumSmaps sums smaps' Rss, Anonymous and Pss lines per mappingKind.
func sumSmaps(r io.Reader, exe string) ([]Mapping, error) {
	byKind := map[string]*Mapping{}
	var cur *Mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			kind := mappingKind(fields, exe)
			if byKind[kind] == nil {
				byKind[kind] = &Mapping{Kind: kind}
			}
			cur = byKind[kind]
			continue
		}
		if cur == nil || len(fields) < 2 {
			continue
		}
		n, _ := strconv.Atoi(fields[1])
		switch fields[0] {
		case "Rss:":
			cur.RSS += n
		case "Anonymous:":
			cur.Anon += n
		case "Pss:":
			cur.PSS += n
		}
	}
	out := make([]Mapping, 0, len(byKind))
	for _, m := range byKind {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].RSS > out[j].RSS || out[i].RSS == out[j].RSS && out[i].Kind < out[j].Kind
	})
	return out, sc.Err()
}

// mappingKind names a mapping from its smaps header (address, perms,
// offset, dev, inode[, path]): the executable's segments by permission
// (text r-x, rodata r--, data rw-), BPF maps (the ring buffer is one,
// mapped twice), the state file's mmap, and anonymous memory (the Go
// heap, stacks, runtime metadata).
func mappingKind(fields []string, exe string) string {
	perms, path := fields[1], ""
	if len(fields) >= 6 {
		path = strings.Join(fields[5:], " ")
	}
	switch {
	case exe != "" && path == exe:
		switch perms[:3] {
		case "r-x":
			return "exe text (r-x)"
		case "r--":
			return "exe rodata, pclntab (r--)"
		default:
			return "exe data (rw-)"
		}
	case path == "":
		return "anonymous (Go heap, stacks, bss)"
	case strings.HasPrefix(path, "anon_inode:bpf-map"):
		return "BPF maps (ring buffer)"
	case strings.HasPrefix(path, "["):
		return path
	default:
		return "file " + filepath.Base(path)
	}
}

// evictPageCache drops path's pages from the page cache (written back
// first), so that the daemon's exec reads its executable through
// readahead as on a node that pulled the image, whether it was just built
// or measured before: on kernels that map a whole large folio on a fault
// (6.18 on ext4), the executable's resident pages depend on the folios the
// page cache holds, which differ between a freshly linked file and one
// read back (the same binary measured 68 and 65 MiB).
func evictPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("evicting %s from the page cache: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s back: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evicting %s from the page cache: %w", path, err)
	}
	return nil
}
