package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/tools/docgen/docpage"
)

// series is one metric family the daemon serves.
type series struct {
	name, typ, help string
	labels          []string
}

// runtimePrefixes are the families of client_golang's Go and process
// collectors: one row each, since their members follow the Go release and
// the host, not drainwatch.
var runtimePrefixes = map[string]string{
	"go_":      "The Go runtime (client_golang's Go collector): goroutines, threads, GC, memory statistics, build info.",
	"process_": "The daemon's process (client_golang's process collector): CPU seconds, resident and virtual memory, open and maximum fds, start time.",
}

// metricSeries lists every family of the daemon's registry, from the
// descriptors its collectors describe. A family's type comes from a sample:
// the reference metrics are given one termination and one probe state so
// that every per-rollout and health family has one; the daemon's own
// collectors say theirs by their Go type.
func metricSeries() ([]series, error) {
	m, own := daemon.MetricsReference()
	sample(m)
	types, err := sampledTypes(m.Registry())
	if err != nil {
		return nil, err
	}
	for _, c := range own {
		for _, d := range describe(c) {
			name, _, _, _ := parseDesc(d)
			if typ := collectorType(c); typ != "" && types[name] == "" {
				types[name] = typ
			}
		}
	}
	var out []series
	seen := map[string]bool{}
	for _, d := range describe(m.Registry()) {
		name, help, labels, err := parseDesc(d)
		if err != nil {
			return nil, err
		}
		if prefix := runtimePrefix(name); prefix != "" {
			name, help, labels = prefix+"*", runtimePrefixes[prefix], nil
			types[name] = "various"
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if types[name] == "" {
			return nil, fmt.Errorf("%s: no sample tells its type; give it one in tools/docgen/metrics.go's sample", name)
		}
		out = append(out, series{name: name, typ: types[name], help: help, labels: labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// sample gives m one complete termination with every mark, one complete
// startup and one probe state, so that each family has a sample to read
// its type from.
func sample(m *exporter.Metrics) {
	at := time.Now()
	s := func(n int) time.Time { return at.Add(time.Duration(n) * time.Second) }
	m.ObserveTermination(correlate.Termination{
		PodUID: "docgen", Pod: "docgen", Complete: true, LastConnAttempt: s(3),
		Workload: collector.Workload{Namespace: "docgen", Kind: "Deployment", Name: "docgen", Revision: "1"},
		Marks: correlate.Marks{DeleteRequested: s(0), Killing: s(0), StopSignal: s(1), EndpointsNotReady: s(1),
			ListenerClosed: s(2), Exit: s(4), PodGone: s(5)},
	})
	m.ObserveStartup(correlate.Startup{
		PodUID: "docgen-new", Pod: "docgen-new", Complete: true, ReadyToFirstAccept: time.Second,
		Workload: collector.Workload{Namespace: "docgen", Kind: "Deployment", Name: "docgen", Revision: "2"},
		Marks:    correlate.StartupMarks{Ready: s(0), FirstAccept: s(1), WindowEnd: s(60)},
	})
	m.SetProbeState("docgen", "attached")
}

func sampledTypes(g prometheus.Gatherer) (map[string]string, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering the reference metrics: %w", err)
	}
	types := map[string]string{}
	for _, f := range fams {
		types[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	return types, nil
}

func collectorType(c prometheus.Collector) string {
	switch c.(type) {
	case prometheus.Counter, *prometheus.CounterVec:
		return "counter"
	case prometheus.Gauge, *prometheus.GaugeVec:
		return "gauge"
	case prometheus.Histogram, *prometheus.HistogramVec:
		return "histogram"
	}
	return ""
}

func runtimePrefix(name string) string {
	for p := range runtimePrefixes {
		if strings.HasPrefix(name, p) {
			return p
		}
	}
	return ""
}

func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var ds []*prometheus.Desc
	for d := range ch {
		ds = append(ds, d)
	}
	return ds
}

// parseDesc reads a descriptor's name, help and variable labels from its
// String form (client_golang exposes no accessors):
// Desc{fqName: "…", help: "…", unit: "…", constLabels: {…}, variableLabels: {a,b}}.
func parseDesc(d *prometheus.Desc) (name, help string, labels []string, err error) {
	s := d.String()
	if name, err = quotedAfter(s, "fqName: "); err != nil {
		return "", "", nil, fmt.Errorf("%s: %w", s, err)
	}
	if help, err = quotedAfter(s, "help: "); err != nil {
		return "", "", nil, fmt.Errorf("%s: %w", s, err)
	}
	i := strings.LastIndex(s, "variableLabels: {")
	if i < 0 || !strings.HasSuffix(s, "}}") {
		return "", "", nil, fmt.Errorf("%s: no variable labels", s)
	}
	for _, l := range strings.Split(s[i+len("variableLabels: {"):len(s)-2], ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			labels = append(labels, l)
		}
	}
	return name, help, labels, nil
}

func quotedAfter(s, key string) (string, error) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", fmt.Errorf("no %q", key)
	}
	q, err := strconv.QuotedPrefix(s[i+len(key):])
	if err != nil {
		return "", err
	}
	return strconv.Unquote(q)
}

// metricsTable is the Markdown table of every family.
func metricsTable() (string, error) {
	ss, err := metricSeries()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n|---|---|---|---|\n")
	for _, s := range ss {
		labels := "—"
		if len(s.labels) > 0 {
			labels = strings.Join(s.labels, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.name, s.typ, labels, docpage.Cell(s.help))
	}
	return b.String(), nil
}
