package soak

import "fmt"

// The bounds a run's samples are held to, against the baseline: the first
// sample taken after the first round's terminations were checked (the
// informers, the first checkpoint and bbolt's first pages are in place).
// What the daemon keeps by design grows with the terminations it keeps
// (complete ones stay in the API and bbolt for --keep-completed, 7 days by
// default), so RSS and bbolt may grow by a fixed budget per termination;
// nothing else may grow with them.
const (
	goroutineSlack = 20       // goroutines: baseline + 20
	fdSlack        = 20       // open fds: baseline + 20
	rssSlackKiB    = 32 << 10 // RSS: baseline + 32 MiB + rssPerTermKiB per termination since
	rssPerTermKiB  = 8
	boltSlack      = 1 << 20 // bbolt: baseline + 1 MiB + boltPerTerm per termination since
	boltPerTerm    = 8 << 10
	mapSlack       = 64 // each hash map: baseline + 2 × pods + 64 (a rollout holds old and new pods)
)

// Bounds states the bounds, for the report.
func Bounds(pods int) string {
	return fmt.Sprintf("against the first sample after the first round: goroutines +%d, open fds +%d, "+
		"RSS +%d MiB + %d KiB per termination since, bbolt +%d MiB + %d KiB per termination since, "+
		"each pinned hash map +%d entries (2 × %d pods + %d)",
		goroutineSlack, fdSlack, rssSlackKiB>>10, rssPerTermKiB, boltSlack>>20, boltPerTerm>>10, 2*pods+mapSlack, pods, mapSlack)
}

// Check returns one line per sample beyond its bound; none without a
// baseline (a run shorter than one round and one sample).
func Check(samples []Sample, pods int) []string {
	base, ok := baseline(samples, pods)
	if !ok {
		return nil
	}
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
		over(s, "goroutines", int64(s.Goroutines), int64(base.Goroutines+goroutineSlack))
		over(s, "open fds", int64(s.OpenFDs), int64(base.OpenFDs+fdSlack))
		over(s, "RSS KiB", int64(s.RSSKiB), int64(base.RSSKiB+rssSlackKiB)+terms*rssPerTermKiB)
		over(s, "bbolt bytes", s.BoltBytes, base.BoltBytes+boltSlack+terms*boltPerTerm)
		for name, n := range s.Maps {
			over(s, "map "+name+" entries", int64(n), int64(base.Maps[name]+2*pods+mapSlack))
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
