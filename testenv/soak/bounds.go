package soak

import "fmt"

// The bounds a run's samples are held to. Goroutines and open fds: against
// the first sample, before any round (the daemon idle with its pods;
// each sample waits up to settleFor for the goroutines a round leaves,
// Events queued behind client-go's rate limit among them, to end). RSS,
// bbolt and maps: against the first sample after the first round (the
// informers, the first checkpoint and bbolt's first pages in place). What
// the daemon keeps by design grows with the terminations it keeps
// (complete ones stay in memory, the API and bbolt for 7 days), so RSS and
// bbolt may grow by a fixed budget per termination; nothing else may. LRU
// maps (local_syns: a key per source, pod address and port; group_exits:
// a key per exit on kernels whose exit tracepoint lacks group_dead;
// neither deleted, only evicted) fill up to their size: they are held to
// their max_entries.
const (
	goroutineSlack = 20       // goroutines: baseline + 20
	fdSlack        = 20       // open fds: baseline + 20
	rssSlackKiB    = 32 << 10 // RSS: baseline + 32 MiB + rssPerTermKiB per termination since
	rssPerTermKiB  = 8
	boltSlack      = 1 << 20 // bbolt: baseline + 1 MiB + boltPerTerm per termination since
	boltPerTerm    = 8 << 10
	mapSlack       = 64 // each hash map: baseline + 2 × pods + 64 (a rollout holds old and new pods)
)

// lruMaps are the pinned LRU maps and their max_entries (bpf/drainwatch.h).
var lruMaps = map[string]int{"local_syns": 4096, "group_exits": 4096}

// Bounds states the bounds, for the report.
func Bounds(pods int) string {
	return fmt.Sprintf("goroutines +%d and open fds +%d over the first sample (idle, before any round); "+
		"against the first sample after the first round: RSS +%d MiB + %d KiB per termination since, bbolt +%d MiB + %d KiB per termination since, "+
		"each pinned hash map +%d entries (2 × %d pods + %d), LRU maps %v at most their size",
		goroutineSlack, fdSlack, rssSlackKiB>>10, rssPerTermKiB, boltSlack>>20, boltPerTerm>>10, 2*pods+mapSlack, pods, mapSlack, lruMaps)
}

// Check returns one line per sample beyond its bound; none without a
// baseline (a run shorter than one round and one sample).
func Check(samples []Sample, pods int) []string {
	base, ok := baseline(samples, pods)
	if !ok {
		return nil
	}
	idle := samples[0]
	var out []string
	over := func(s Sample, what string, got, limit int64) {
		if got > limit {
			out = append(out, fmt.Sprintf("t=%v: %s %d > bound %d (baseline at t=%v)", s.Elapsed, what, got, limit, base.Elapsed))
		}
	}
	for _, s := range samples {
		if s.Elapsed < base.Elapsed {
			continue
		}
		terms := int64(s.Terminations - base.Terminations)
		over(s, "goroutines", int64(s.Goroutines), int64(idle.Goroutines+goroutineSlack))
		over(s, "open fds", int64(s.OpenFDs), int64(idle.OpenFDs+fdSlack))
		over(s, "RSS KiB", int64(s.RSSKiB), int64(base.RSSKiB+rssSlackKiB)+terms*rssPerTermKiB)
		over(s, "bbolt bytes", s.BoltBytes, base.BoltBytes+boltSlack+terms*boltPerTerm)
		for name, n := range s.Maps {
			limit, lru := lruMaps[name]
			if !lru {
				limit = base.Maps[name] + 2*pods + mapSlack
			}
			over(s, "map "+name+" entries", int64(n), int64(limit))
		}
	}
	return out
}

func baseline(samples []Sample, pods int) (Sample, bool) {
	for _, s := range samples {
		if s.Terminations >= pods && s.Err == "" {
			return s, true
		}
	}
	return Sample{}, false
}
