package kernel

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// The LRU maps, in the order of enum lru_map (bpf/drainwatch.h).
var lruMaps = []string{"local_syns", "group_exits"}

// evictionsEvery paces the count of an LRU map's entries: a walk of up to
// 4096 keys, one syscall each, is not for every tick.
const evictionsEvery = 10 * time.Second

// evictions counts what the LRU maps forgot. Neither map deletes an entry,
// so every insert the BPF side counted and that is not in the map any more
// was evicted. The count is read in that order (inserts, then entries): an
// insert between the two reads makes it one short until the next count,
// never one too many, and it only moves up.
type evictions struct {
	mu      sync.Mutex
	at      time.Time
	inserts []uint64
	evicted map[string]uint64
}

// MapEvictions returns, per LRU map, the entries evicted since its maps
// were created (pinned maps count across restarts). It walks a map's keys
// at most every 10 s, and only when its inserts changed.
func (k *Kernel) MapEvictions(now time.Time) (map[string]uint64, error) {
	e := &k.evictions
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.evicted == nil {
		e.evicted = map[string]uint64{}
		e.inserts = make([]uint64, len(lruMaps))
	} else if now.Sub(e.at) < evictionsEvery {
		return copyCounts(e.evicted), nil
	}
	e.at = now
	for i, name := range lruMaps {
		ins, err := k.maps.lruInserts(uint32(i))
		if err != nil {
			return copyCounts(e.evicted), err
		}
		if ins == e.inserts[i] {
			continue
		}
		n, err := countEntries(k.maps.byName[name])
		if err != nil {
			return copyCounts(e.evicted), fmt.Errorf("counting the entries of BPF map %s: %w", name, err)
		}
		e.inserts[i] = ins
		if ins > n && ins-n > e.evicted[name] {
			e.evicted[name] = ins - n
		}
	}
	return copyCounts(e.evicted), nil
}

// lruInserts sums the per-CPU insert counter of LRU map i.
func (m sharedMaps) lruInserts(i uint32) (uint64, error) {
	mp := m.byName["lru_inserts"]
	if mp == nil {
		return 0, fmt.Errorf("reading the LRU insert counters: map lru_inserts not loaded")
	}
	var perCPU []uint64
	if err := mp.Lookup(i, &perCPU); err != nil {
		return 0, fmt.Errorf("reading the LRU insert counter %d: %w", i, err)
	}
	var sum uint64
	for _, n := range perCPU {
		sum += n
	}
	return sum, nil
}

// countEntries walks a hash map's keys (values are not copied).
func countEntries(mp *ebpf.Map) (uint64, error) {
	if mp == nil {
		return 0, fmt.Errorf("map not loaded")
	}
	var n uint64
	var key []byte
	next := make([]byte, mp.KeySize())
	for {
		var prev any
		if key != nil {
			prev = key
		}
		if err := mp.NextKey(prev, next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return n, nil
			}
			return n, err
		}
		n++
		key = append(key[:0], next...)
		if n > uint64(mp.MaxEntries())*2 {
			// Keys evicted under the walk can restart it; an LRU map never
			// holds more than its size, so stop rather than loop.
			return uint64(mp.MaxEntries()), nil
		}
	}
}

func copyCounts(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
