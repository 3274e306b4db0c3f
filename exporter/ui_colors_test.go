package exporter

import (
	"testing"

	"github.com/drainwatch/drainwatch/correlate"
)

// TestEveryMarkHasAColor: a mark added to correlate.MarkDefs gets its line
// colour on the page.
func TestEveryMarkHasAColor(t *testing.T) {
	for _, d := range correlate.MarkDefs {
		if MarkColors[d.Name] == "" {
			t.Errorf("mark %s has no colour", d.Name)
		}
	}
	if len(MarkColors) != len(correlate.MarkDefs) {
		t.Errorf("%d colours for %d marks", len(MarkColors), len(correlate.MarkDefs))
	}
}
