package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"

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
	Err          string         // what could not be read
}

func (s Sample) String() string {
	return fmt.Sprintf("t=%v terminations=%d rss=%d KiB goroutines=%d fds=%d bbolt=%d B maps=%v%s",
		s.Elapsed.Round(time.Second), s.Terminations, s.RSSKiB, s.Goroutines, s.OpenFDs, s.BoltBytes, s.Maps, s.Err)
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
	s.Goroutines, err = goroutines(d.URL)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			return int(v), err
		}
	}
	return 0, fmt.Errorf("no go_goroutines in /metrics")
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
