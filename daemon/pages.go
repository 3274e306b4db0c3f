package daemon

import (
	"bufio"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
)

// The daemon starts by running the init code of the ~1,000 packages it
// links (client-go's scheme registers every API group), parses the
// kernel's BTF and loads its BPF programs: work done once, which leaves
// about 40 MiB of the executable's code and read-only tables mapped
// (the kernel maps 64 KiB around each page it faults in), and a heap
// grown for the BTF. A burst of work (a rollout binding a hundred pods)
// maps more. None of it is used again on a quiet node. releasePages,
// called when the loop turns idle, unmaps those pages (they stay in the
// page cache: what runs again faults them back in without reading the
// disk) and returns the freed heap to the system, so that the daemon's
// resident memory is its working set.
func releasePages(log zerolog.Logger) {
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		log.Debug().Err(err).Msg("not releasing the executable's pages")
		return
	}
	defer f.Close()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		log.Debug().Err(err).Msg("not releasing the executable's pages")
		return
	}
	var kib int
	for _, m := range readOnlyMappings(f, exe) {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			log.Debug().Err(errno).Msg("releasing the executable's pages")
			continue
		}
		kib += m.rssKiB
	}
	log.Debug().Int("kib", kib).Msg("released the executable's pages mapped by the last burst of work")
}

// mapping is one line of /proc/self/smaps with the fields used here.
type mapping struct {
	start, end uintptr
	rssKiB     int
}

// readOnlyMappings are the mappings of path that cannot be written and
// hold no anonymous (copied-on-write) page: their pages are the file's,
// clean, and dropping them loses nothing.
func readOnlyMappings(smaps io.Reader, path string) []mapping {
	var out []mapping
	var cur *mapping
	var anon bool
	flush := func() {
		if cur != nil && !anon {
			out = append(out, *cur)
		}
		cur, anon = nil, false
	}
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			flush()
			if len(fields) == 6 && fields[5] == path && !strings.Contains(fields[1], "w") {
				cur = parseRange(fields[0])
			}
		case cur != nil && len(fields) >= 2 && fields[0] == "Rss:":
			cur.rssKiB, _ = strconv.Atoi(fields[1])
		case cur != nil && len(fields) >= 2 && fields[0] == "Anonymous:":
			anon = fields[1] != "0"
		}
	}
	flush()
	return out
}

// parseRange reads "start-end" in hex; nil when it does not parse.
func parseRange(s string) *mapping {
	lo, hi, ok := strings.Cut(s, "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if !ok || err1 != nil || err2 != nil || end <= start {
		return nil
	}
	return &mapping{start: uintptr(start), end: uintptr(end)}
}
