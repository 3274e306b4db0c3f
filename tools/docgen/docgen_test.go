package main

import (
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/tools/docgen/docpage"
)

// TestPagesMatchTheCode generates every block in memory and fails when a
// committed page differs (make test runs it).
func TestPagesMatchTheCode(t *testing.T) {
	pages, err := rewrite("../..")
	if err != nil {
		t.Fatal(err)
	}
	for path, p := range pages {
		if p[0] != p[1] {
			t.Errorf("%s differs from what the code generates: run `%s` and commit the result\n%s", path, docpage.FixCommand, docpage.FirstDiff(p[0], p[1]))
		}
	}
}

// TestEveryDrainwatchMetricListed checks the reference against the
// registry itself: each drainwatch_ family the daemon registers is a row.
func TestEveryDrainwatchMetricListed(t *testing.T) {
	table, err := metricsTable()
	if err != nil {
		t.Fatal(err)
	}
	ss, err := metricSeries()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s.name, "drainwatch_") {
			n++
			if !strings.Contains(table, "| `"+s.name+"` |") {
				t.Errorf("%s missing from the table", s.name)
			}
		}
	}
	if n == 0 {
		t.Fatal("no drainwatch_ family in the daemon's registry")
	}
}
