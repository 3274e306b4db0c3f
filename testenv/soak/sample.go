package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/drainwatch/drainwatch/testenv/bench"
	"github.com/drainwatch/drainwatch/testenv/lab"
)

// Sample is the daemon's footprint at one moment.
type Sample struct {
	Elapsed      time.Duration
	Terminations int // checked before this sample
	RSSKiB       int // VmRSS
	Goroutines   int // go_goroutines from its /metrics
	OpenFDs      int // entries of /proc/PID/fd
	BoltBytes    int64
	Maps         map[string]int // entries of each pinned hash map
	// RSSBy is VmRSS split by what is mapped (/proc/PID/smaps): the
	// binary's pages, anonymous memory (the Go heap, stacks, the
	// runtime's own), BPF maps mmapped (the ring buffer), the bbolt file
	// and everything else. Which of them grows is what says why RSS does.
	RSSBy map[string]int
	// HeapAlloc and HeapInuse are the Go heap (go_memstats_alloc_bytes,
	// go_memstats_heap_inuse_bytes on its /metrics): live objects plus
	// garbage not yet collected, and the spans holding them.
	HeapAlloc, HeapInuse int64
	Err                  string // what could not be read
}

func (s Sample) String() string {
	return fmt.Sprintf("t=%v terminations=%d rss=%d KiB (%s) heap=%d KiB goroutines=%d fds=%d bbolt=%d B maps=%v%s",
		s.Elapsed.Round(time.Second), s.Terminations, s.RSSKiB, rssByString(s.RSSBy), s.HeapAlloc>>10, s.Goroutines, s.OpenFDs, s.BoltBytes, s.Maps, s.Err)
}

func rssByString(by map[string]int) string {
	parts := make([]string, 0, len(by))
	for _, k := range rssKinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	return strings.Join(parts, ", ")
}

// storeFile is the daemon's bbolt file in its state directory
// (daemon/store.go).
const storeFile = "drainwatch.db"

// takeSample reads d's footprint; what fails to read stays 0 and is noted.
func takeSample(d *lab.Daemon, stateDir, pinDir string) Sample {
	var s Sample
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	m, err := bench.ProcessMemory(d.PID())
	s.RSSKiB = m.RSS
	note(err)
	s.OpenFDs, err = openFDs(d.PID())
	note(err)
	s.RSSBy, err = rssByMapping(d.PID(), stateDir)
	note(err)
	rt, err := scrape(d.URL, "go_goroutines", "go_memstats_alloc_bytes", "go_memstats_heap_inuse_bytes")
	s.Goroutines = int(rt["go_goroutines"])
	s.HeapAlloc, s.HeapInuse = int64(rt["go_memstats_alloc_bytes"]), int64(rt["go_memstats_heap_inuse_bytes"])
	note(err)
	if fi, err := os.Stat(filepath.Join(stateDir, storeFile)); err == nil {
		s.BoltBytes = fi.Size()
	} else {
		note(err)
	}
	s.Maps, err = MapEntries(pinDir)
	note(err)
	if len(errs) > 0 {
		s.Err = " errors: " + strings.Join(errs, "; ")
	}
	return s
}

func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// goroutines reads go_goroutines from the daemon's /metrics.
func goroutines(url string) (int, error) {
	v, err := scrape(url, "go_goroutines")
	return int(v["go_goroutines"]), err
}

// scrape reads the named unlabelled gauges and counters from the daemon's
// /metrics (parsed as testenv/kubeproxy parses kube-proxy's); a name it
// does not find is an error.
func scrape(url string, names ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	out := make(map[string]float64, len(names))
	for _, n := range names {
		f := fams[n]
		if len(f.GetMetric()) != 1 {
			return out, fmt.Errorf("/metrics has %d series of %s, want 1", len(f.GetMetric()), n)
		}
		m := f.GetMetric()[0]
		out[n] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	return out, nil
}

// The kinds of mapping RSSBy tells apart.
const (
	rssBinary = "binary" // the executable's text, data and bss
	rssAnon   = "anon"   // anonymous: the Go heap, stacks, the runtime's
	rssBPF    = "bpf"    // BPF maps mmapped: the ring buffer
	rssBolt   = "bbolt"  // the state file, mmapped by bbolt
	rssOther  = "other"  // libraries, [stack], [vdso] and the like
)

// rssByMapping sums the Rss of each mapping in /proc/PID/smaps by kind.
func rssByMapping(pid int, stateDir string) (map[string]int, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, fmt.Errorf("the daemon's executable: %w", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, fmt.Errorf("the daemon's mappings: %w", err)
	}
	defer f.Close()
	return parseSmaps(f, exe, filepath.Join(stateDir, storeFile))
}

// parseSmaps sums smaps' "Rss:" lines (KiB) by the kind of the mapping
// they follow; exe and bolt are the paths of the executable and the
// state file.
func parseSmaps(r io.Reader, exe, bolt string) (map[string]int, error) {
	out := map[string]int{rssBinary: 0, rssAnon: 0, rssBPF: 0, rssBolt: 0, rssOther: 0}
	kind := rssOther
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "Rss:" && len(fields) >= 2 {
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				return out, fmt.Errorf("smaps: %q: %w", sc.Text(), err)
			}
			out[kind] += n
			continue
		}
		// A mapping's header: "start-end perms offset dev inode [path]".
		if len(fields) < 5 || !strings.Contains(fields[0], "-") || strings.HasSuffix(fields[0], ":") {
			continue
		}
		path := strings.Join(fields[5:], " ")
		switch {
		case path == exe:
			kind = rssBinary
		case path == "" || path == "[heap]":
			kind = rssAnon
		case strings.HasPrefix(path, "anon_inode:bpf"):
			kind = rssBPF
		case path == bolt:
			kind = rssBolt
		default:
			kind = rssOther
		}
	}
	return out, sc.Err()
}

// hashTypes are the map types whose occupancy varies; arrays and the ring
// buffer have a fixed size.
var hashTypes = []ebpf.MapType{ebpf.Hash, ebpf.LRUHash, ebpf.PerCPUHash, ebpf.LRUCPUHash}

// MapEntries counts the keys of each hash map pinned under dir
// (<dir>/<program set>/map_<name>), by map name. A key deleted while it
// is counted may restart the kernel's iteration: the count is bounded by
// the map's size, not exact under churn.
func MapEntries(dir string) (map[string]int, error) {
	out := map[string]int{}
	return out, mapEntriesInto(dir, out)
}

func mapEntriesInto(dir string, out map[string]int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pinned maps: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := mapEntriesInto(filepath.Join(dir, e.Name()), out); err != nil {
				return err
			}
			continue
		}
		name, ok := strings.CutPrefix(e.Name(), "map_")
		if !ok {
			continue
		}
		n, isHash, err := countKeys(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if isHash {
			out[name] = n
		}
	}
	return nil
}

func countKeys(path string) (int, bool, error) {
	m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return 0, false, fmt.Errorf("loading %s: %w", path, err)
	}
	defer m.Close()
	if !slices.Contains(hashTypes, m.Type()) {
		return 0, false, nil
	}
	key, next := make([]byte, m.KeySize()), make([]byte, m.KeySize())
	n := 0
	var prev any // nil: the first key
	for n <= int(m.MaxEntries()) {
		if err := m.NextKey(prev, next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return n, true, nil
			}
			return n, true, fmt.Errorf("iterating %s: %w", path, err)
		}
		n++
		copy(key, next)
		prev = key
	}
	return n, true, nil
}
