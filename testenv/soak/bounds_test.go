package soak

import (
	"maps"
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

// TestSlope: a least-squares fit, in the samples' units per hour.
func TestSlope(t *testing.T) {
	if got := Slope([]float64{0, 0.5, 1}, []float64{10, 15, 20}); got != 10 {
		t.Errorf("Slope of a line = %v, want 10", got)
	}
	if got := Slope([]float64{0, 1, 2, 3}, []float64{5, 5, 5, 5}); got != 0 {
		t.Errorf("Slope of a flat line = %v, want 0", got)
	}
	if got := Slope([]float64{1}, []float64{5}); got != 0 {
		t.Errorf("Slope of one point = %v, want 0", got)
	}
}

// TestParseSmaps: each Rss line counts for the mapping it follows, by
// kind; the headers of file, anonymous and anon_inode mappings all parse.
func TestParseSmaps(t *testing.T) {
	const smaps = `00400000-01a00000 r-xp 00000000 08:01 1234 /usr/bin/drainwatch
Size:              22528 kB
Rss:               20000 kB
VmFlags: rd ex mr mw me
01a00000-03000000 r--p 01600000 08:01 1234 /usr/bin/drainwatch
Rss:               15000 kB
03000000-03100000 rw-p 02c00000 08:01 1234 /usr/bin/drainwatch
Rss:                 300 kB
c000000000-c004000000 rw-p 00000000 00:00 0 
Rss:               24000 kB
7f0000000000-7f0000800000 rw-p 00000000 00:00 0
Rss:                1000 kB
7f1000000000-7f1000400000 r--s 00000000 00:0f 77 anon_inode:bpf-map
Rss:                4100 kB
7f2000000000-7f2000400000 r--s 00000000 08:01 99 /var/lib/drainwatch/state-n1/drainwatch.db
Rss:                4096 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  40 kB
`
	got, err := parseSmaps(strings.NewReader(smaps), "/usr/bin/drainwatch", "/var/lib/drainwatch/state-n1/drainwatch.db")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{rssBinary: 35300, rssAnon: 25000, rssBPF: 4100, rssBolt: 4096, rssOther: 40}
	if !maps.Equal(got, want) {
		t.Errorf("parseSmaps = %v, want %v", got, want)
	}
}
