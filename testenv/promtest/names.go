package promtest

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

var (
	stringLit  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	braces     = regexp.MustCompile(`\{[^}]*\}`)
	brackets   = regexp.MustCompile(`\[[^\]]*\]`)
	offsets    = regexp.MustCompile(`\boffset\s+-?[0-9a-zA-Z]+|@\s*[0-9.a-z()]+`)
	labelLists = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*\s*\(?`)
	keywords   = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "and": true, "or": true, "unless": true, "offset": true, "bool": true, "inf": true,
		"nan": true, "sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true,
		"stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true}
)

// MetricNames returns the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges, grouping lists,
// function calls and keywords are removed. It is a lexer, not a parser:
// promtool (CheckQueries) decides whether the expression is valid.
func MetricNames(expr string) []string {
	s := stringLit.ReplaceAllString(expr, `""`)
	s = braces.ReplaceAllString(s, "")
	s = brackets.ReplaceAllString(s, "")
	s = labelLists.ReplaceAllString(s, "")
	s = offsets.ReplaceAllString(s, "")
	var names []string
	for _, tok := range identifier.FindAllString(s, -1) {
		if strings.HasSuffix(tok, "(") {
			continue // a function call
		}
		tok = strings.TrimSpace(tok)
		if !keywords[tok] && !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

// ExportedNames returns every series name drainwatch's /metrics serves
// (histograms with their _bucket, _sum and _count), gathered from a real
// exporter.Metrics after one termination, so no family is missing.
func ExportedNames() (map[string]bool, error) {
	m := exporter.NewMetrics(exporter.Options{})
	t0 := time.Now()
	m.ObserveTermination(correlate.Termination{PodUID: "u", Complete: true, Outcome: "clean", PodIP: netip.IPv4Unspecified(),
		Workload: collector.Workload{Namespace: "n", Kind: "Deployment", Name: "w", Revision: "1"},
		Marks: correlate.Marks{DeleteRequested: t0, Killing: t0, StopSignal: t0, ListenerClosed: t0,
			EndpointsNotReady: t0, Exit: t0.Add(time.Second)}, LastConnAttempt: t0.Add(time.Second)})
	m.ObserveStartup(correlate.Startup{PodUID: "v", Complete: true,
		Workload: collector.Workload{Namespace: "n", Kind: "Deployment", Name: "w", Revision: "2"},
		Marks:    correlate.StartupMarks{Ready: t0, FirstAccept: t0.Add(time.Second)}, ReadyToFirstAccept: time.Second})
	m.SetProbeState("p", "attached")
	// The OTLP exporter's counters, which the daemon registers beside the
	// exporter's when --otlp-endpoint is set.
	om := otlp.NewMetrics()
	om.Failures.Inc()
	om.Exported.Inc()
	m.Registry().MustRegister(om.Collectors()...)
	mfs, err := m.Registry().Gather()
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+suffix] = true
			}
		}
	}
	return names, nil
}
