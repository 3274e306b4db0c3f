package soak

import (
	"strings"
	"testing"
	"time"
)

func TestSparkline(t *testing.T) {
	if got := Sparkline([]float64{1, 2, 3, 8}); got != "▁▂▃█" {
		t.Errorf("Sparkline = %q", got)
	}
	if got := Sparkline([]float64{5, 5}); got != "▁▁" {
		t.Errorf("flat Sparkline = %q", got)
	}
}

// TestCheck: the baseline is the first sample after the first round's
// terminations; RSS and bbolt may grow by their budget per termination
// since, goroutines, fds and maps only by their slack.
func TestCheck(t *testing.T) {
	const pods = 10
	at := func(min, terms, rss, gr, fds int, bolt int64, conns int) Sample {
		return Sample{Elapsed: time.Duration(min) * time.Minute, Terminations: terms, RSSKiB: rss, Goroutines: gr,
			OpenFDs: fds, BoltBytes: bolt, Maps: map[string]int{"conns": conns, "local_syns": 4096}}
	}
	base := []Sample{
		at(0, 0, 1000, 40, 100, 999<<20, 999), // idle, before the first round: goroutines and fds only
		at(1, 10, 50_000, 30, 90, 1<<20, 5),   // the baseline of RSS, bbolt and maps
	}
	ok := at(60, 600, 50_000+rssSlackKiB+590*rssPerTermKiB, 40+goroutineSlack, 100+fdSlack, 2<<20+590*boltPerTerm, 5+2*pods+mapSlack)
	if got := Check(append(base, ok), pods); len(got) != 0 {
		t.Errorf("samples at their bounds: %v", got)
	}
	over := at(60, 600, ok.RSSKiB+1, ok.Goroutines+1, ok.OpenFDs+1, ok.BoltBytes+1, ok.Maps["conns"]+1)
	got := Check(append(base, over), pods)
	for _, what := range []string{"goroutines", "open fds", "RSS", "bbolt", "map conns"} {
		if !strings.Contains(strings.Join(got, "\n"), what) {
			t.Errorf("%s one above its bound not reported: %v", what, got)
		}
	}
	if got := Check(base[:1], pods); got != nil {
		t.Errorf("no baseline yet: %v", got)
	}
}
