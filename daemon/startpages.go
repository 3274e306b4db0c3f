package daemon

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages unmaps this process's read-only pages of its own
// executable (code and read-only data) once start-up is over. Start-up
// runs code it never runs again: the init of every Kubernetes API group in
// client-go's scheme, the BPF loader and verifier round trips, the first
// pod list. The kernel maps those pages and, with fault-around, their
// neighbours; they stay in the daemon's RSS (VmRSS counts them: ~45 MiB of
// an 88 MiB binary) though nothing reads them again. MADV_DONTNEED on a
// read-only private file mapping only drops the page table entries: the
// pages stay in the page cache, where the kernel can reclaim them, and the
// code that does run faults its pages back in (minor faults, no I/O). It
// returns the bytes of mappings released. Writable mappings (.data, .bss)
// are never touched: DONTNEED would reset them.
func releaseStartupPages(procRoot string) (uint64, error) {
	exe, err := os.Readlink(filepath.Join(procRoot, "self", "exe"))
	if err != nil {
		return 0, fmt.Errorf("finding this executable: %w", err)
	}
	ranges, err := readOnlyMappings(filepath.Join(procRoot, "self", "maps"), exe)
	if err != nil {
		return 0, err
	}
	var released uint64
	for _, r := range ranges {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise(MADV_DONTNEED) %#x-%#x of %s: %w", r[0], r[1], exe, errno)
		}
		released += uint64(r[1] - r[0])
	}
	return released, nil
}

// readOnlyMappings returns [start, end) of the mappings of path in a
// /proc/<pid>/maps file that are not writable.
func readOnlyMappings(mapsFile, path string) ([][2]uintptr, error) {
	f, err := os.Open(mapsFile)
	if err != nil {
		return nil, fmt.Errorf("reading this process's mappings: %w", err)
	}
	defer f.Close()
	var out [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "start-end perms offset dev inode path"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != path || strings.ContainsRune(fields[1], 'w') {
			continue
		}
		start, end, ok := strings.Cut(fields[0], "-")
		s, err1 := strconv.ParseUint(start, 16, 64)
		e, err2 := strconv.ParseUint(end, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: malformed mapping %q", mapsFile, fields[0])
		}
		out = append(out, [2]uintptr{uintptr(s), uintptr(e)})
	}
	return out, sc.Err()
}
