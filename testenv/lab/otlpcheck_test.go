package lab

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/otelcol"
)

// TestCompareOTLP: the check passes on the same pods and totals, and fails
// on a record held twice, a pod missing and totals that differ.
func TestCompareOTLP(t *testing.T) {
	at := time.Date(2026, 12, 4, 2, 0, 0, 0, time.UTC)
	view := func(uid string, refused int) exporter.TerminationView {
		return exporter.TerminationView{Termination: correlate.Termination{PodUID: uid, Complete: true,
			Counts: correlate.Counts{RefusedAfterSigterm: refused}, Marks: correlate.Marks{StopSignal: at}}}
	}
	rec := func(uid string, refused int64) otelcol.Log {
		return otelcol.Log{EventName: "drainwatch.termination", Resource: map[string]any{"k8s.pod.uid": uid},
			Attributes: map[string]any{"drainwatch.record.id": uid + "@x", "drainwatch.counts.refused_after_sigterm": refused}}
	}
	vs := []exporter.TerminationView{view("a", 3), view("b", 0)}
	startup := otelcol.Log{EventName: "drainwatch.startup", Resource: map[string]any{"k8s.pod.uid": "c"}}
	for _, c := range []struct {
		name string
		logs []otelcol.Log
		ok   bool
	}{
		{"equal", []otelcol.Log{rec("a", 3), rec("b", 0), startup}, true},
		{"twice", []otelcol.Log{rec("a", 3), rec("b", 0), rec("b", 0)}, false},
		{"missing", []otelcol.Log{rec("a", 3)}, false},
		{"totals", []otelcol.Log{rec("a", 2), rec("b", 0)}, false},
	} {
		if _, _, why := compareOTLP(vs, c.logs); (why == "") != c.ok {
			t.Errorf("%s: %q, want ok=%v", c.name, why, c.ok)
		}
	}
}
