package soak

import (
	"encoding/csv"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// write puts samples.csv, rounds.csv and plot.txt (sparklines, the bounds
// and what broke them) into the results directory.
func (s *soak) write() error {
	r := s.report
	if err := writeCSV(filepath.Join(s.cfg.Out, "samples.csv"), sampleRows(r.Samples)); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(s.cfg.Out, "rounds.csv"), roundRows(r.Rounds)); err != nil {
		return err
	}
	text := Plot(r.Samples, s.cfg.Pods) + "\nbounds: " + Bounds(s.cfg.Pods) + "\n" + Verdict(r)
	if err := os.WriteFile(filepath.Join(s.cfg.Out, "plot.txt"), []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing plot.txt: %w", err)
	}
	s.cfg.Progress.Block(text)
	return nil
}

// Verdict is the run's outcome in a few lines.
func Verdict(r Report) string {
	var b strings.Builder
	terms, exact := 0, 0
	for _, rd := range r.Rounds {
		terms, exact = terms+rd.Replaced, exact+rd.Exact
	}
	fmt.Fprintf(&b, "%d rounds, %d terminations, %d exact\n", len(r.Rounds), terms, exact)
	for _, l := range append(slices.Clone(r.Inexact), r.BoundsBroken...) {
		fmt.Fprintf(&b, "  FAIL %s\n", l)
	}
	if r.OK() {
		b.WriteString("PASS: every termination exact, every sample within its bound\n")
	}
	return b.String()
}

// mapNames are the maps sampled, sorted.
func mapNames(samples []Sample) []string {
	set := map[string]bool{}
	for _, s := range samples {
		for n := range s.Maps {
			set[n] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// rssKinds are the kinds of mapping RSSBy splits VmRSS into, in CSV order.
var rssKinds = []string{rssBinary, rssAnon, rssBPF, rssBolt, rssOther}

// series are the sampled columns, by name, in CSV order.
func series(samples []Sample) ([]string, [][]float64) {
	names := []string{"elapsed_s", "terminations", "rss_kib"}
	for _, k := range rssKinds {
		names = append(names, "rss_"+k+"_kib")
	}
	names = append(names, "heap_alloc_bytes", "heap_inuse_bytes", "goroutines", "open_fds", "bbolt_bytes")
	mapCols := mapNames(samples)
	for _, m := range mapCols {
		names = append(names, "map_"+m)
	}
	cols := make([][]float64, len(names))
	for _, s := range samples {
		row := []float64{s.Elapsed.Seconds(), float64(s.Terminations), float64(s.RSSKiB)}
		for _, k := range rssKinds {
			row = append(row, float64(s.RSSBy[k]))
		}
		row = append(row, float64(s.HeapAlloc), float64(s.HeapInuse), float64(s.Goroutines), float64(s.OpenFDs), float64(s.BoltBytes))
		for _, m := range mapCols {
			row = append(row, float64(s.Maps[m]))
		}
		for i, v := range row {
			cols[i] = append(cols[i], v)
		}
	}
	return names, cols
}

func sampleRows(samples []Sample) [][]string {
	names, cols := series(samples)
	rows := [][]string{names}
	for i := range samples {
		row := make([]string, len(cols))
		for j := range cols {
			row[j] = strconv.FormatFloat(cols[j][i], 'f', -1, 64)
		}
		rows = append(rows, row)
	}
	return rows
}

func roundRows(rounds []Round) [][]string {
	rows := [][]string{{"round", "started", "took_s", "replaced", "exact", "router_refused", "clients"}}
	for _, r := range rounds {
		rows = append(rows, []string{strconv.Itoa(r.Index), r.Started.UTC().Format(time.RFC3339), fmt.Sprintf("%.1f", r.Took.Seconds()),
			strconv.Itoa(r.Replaced), strconv.Itoa(r.Exact), strconv.Itoa(r.Refused), r.ClientOutput})
	}
	return rows
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	w := csv.NewWriter(f)
	werr := w.WriteAll(rows)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	return nil
}
