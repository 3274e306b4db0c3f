package gates_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// What the controllers pass: Argo the Rollout's namespace and name and the
// stable and the canary pod-template hashes; Flagger the target.
var (
	argoArgs     = map[string]string{"namespace": "shop", "rollout": "web", "stable-hash": "6c7d9f", "canary-hash": "8f9e5b", "window": "5m"}
	flaggerVars  = map[string]string{"namespace": "shop", "target": "web", "interval": "1m"}
	lossMetrics  = []string{"refused-after-stop-signal", "requests-killed", "refused-after-ready"}
	flaggerNames = map[string]string{"refused-after-stop-signal": "drainwatch-refused-after-stop-signal",
		"requests-killed": "drainwatch-requests-killed", "refused-after-ready": "drainwatch-refused-after-ready"}
)

// TestGateQueriesParse: Prometheus' own parser accepts every query once the
// controller has filled in its arguments.
func TestGateQueriesParse(t *testing.T) {
	var exprs []string
	for _, q := range argoQueries(t, argoArgs) {
		exprs = append(exprs, q)
	}
	for _, q := range flaggerQueries(t, flaggerVars) {
		exprs = append(exprs, q)
	}
	promtest.CheckQueries(t, exprs)
}

// TestGatesCountWhatWasLost: the real Prometheus scrapes drainwatch's
// exporter. Before anything was lost every query answers exactly one value,
// 0 (not an empty vector); drainwatch-scraped answers 1. Then terminations
// and startups of the gated revisions and of their neighbours (an older
// revision, another workload, another namespace) are counted, their series
// appearing at their final values within one scrape: the Argo queries count
// exactly the stable and the canary revision's losses, the Flagger queries
// the primary's and the canary's.
func TestGatesCountWhatWasLost(t *testing.T) {
	m := exporter.NewMetrics(exporter.Options{})
	prom := promtest.ScrapeHandler(t, exporter.NewServer(exporter.ServerConfig{Metrics: m, Log: zerolog.Nop()}).Handler())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argo, flagger := argoQueries(t, argoArgs), flaggerQueries(t, flaggerVars)
	prom.WaitValue(ctx, t, "count(drainwatch_build_info)", 1)
	for name, want := range map[string]float64{"drainwatch-scraped": 1, "refused-after-stop-signal": 0, "requests-killed": 0, "refused-after-ready": 0} {
		checkValue(ctx, t, prom, "argo "+name, argo[name], want)
		checkValue(ctx, t, prom, "flagger "+name, flagger[flaggerName(name)], want)
	}
	observe(m)
	prom.WaitValue(ctx, t, "sum(drainwatch_terminations_total)", 8)
	for name, want := range map[string]float64{"refused-after-stop-signal": 3, "requests-killed": 1 + 2, "refused-after-ready": 4} {
		checkValue(ctx, t, prom, "argo "+name, argo[name], want)
	}
	for name, want := range map[string]float64{"refused-after-stop-signal": 5, "requests-killed": 1, "refused-after-ready": 6} {
		checkValue(ctx, t, prom, "flagger "+name, flagger[flaggerName(name)], want)
	}
}

// observe counts what each gate must and must not see.
func observe(m *exporter.Metrics) {
	t0 := time.Now()
	n := 0
	term := func(kind, ns, name, rev string, c correlate.Counts) {
		n++
		m.ObserveTermination(correlate.Termination{PodUID: fmt.Sprintf("uid-%d", n), Pod: fmt.Sprintf("%s-%d", name, n),
			Workload: collector.Workload{Namespace: ns, Kind: kind, Name: name, Revision: rev},
			Marks:    correlate.Marks{StopSignal: t0, Exit: t0.Add(time.Second)}, Counts: c, Outcome: "refused", Complete: true})
	}
	startup := func(kind, ns, name, rev string, refused int) {
		n++
		m.ObserveStartup(correlate.Startup{PodUID: fmt.Sprintf("uid-%d", n), Namespace: ns, Pod: fmt.Sprintf("%s-%d", name, n),
			Workload: collector.Workload{Namespace: ns, Kind: kind, Name: name, Revision: rev},
			Counts:   correlate.StartupCounts{RefusedAfterReady: refused}, Complete: true})
	}
	// Argo: the stable and the canary revision count; an older revision,
	// another Rollout and a Deployment of the same name do not.
	term("Rollout", "shop", "web", "6c7d9f", correlate.Counts{RefusedAfterSigterm: 3, RequestsKilledBySigkill: 1})
	term("Rollout", "shop", "web", "8f9e5b", correlate.Counts{RequestsKilledAtExit: 2})
	startup("Rollout", "shop", "web", "8f9e5b", 4)
	term("Rollout", "shop", "web", "1a2b3c", correlate.Counts{RefusedAfterSigterm: 50})
	term("Rollout", "shop", "web2", "6c7d9f", correlate.Counts{RefusedAfterSigterm: 7})
	// Flagger: the primary and the canary Deployment count; a Deployment
	// whose name only starts like the target's, and another namespace, do not.
	term("Deployment", "shop", "web-primary", "4", correlate.Counts{RefusedAfterSigterm: 5})
	term("Deployment", "shop", "web", "2", correlate.Counts{RequestsKilledBySigkill: 1})
	startup("Deployment", "shop", "web", "2", 6)
	term("Deployment", "shop", "webapp", "1", correlate.Counts{RefusedAfterSigterm: 9})
	term("Deployment", "other", "web-primary", "1", correlate.Counts{RefusedAfterSigterm: 11})
}

func flaggerName(metric string) string {
	if n, ok := flaggerNames[metric]; ok {
		return n
	}
	return metric
}

// checkValue: the query answers exactly one sample, of value want.
func checkValue(ctx context.Context, t *testing.T, prom *promtest.Server, name, expr string, want float64) {
	t.Helper()
	got, err := prom.Query(ctx, expr)
	if err != nil || len(got) != 1 || got[0].Value != want {
		t.Errorf("%s = %+v (%v), want exactly one value %v\nquery: %s", name, got, err, want, expr)
		return
	}
	t.Logf("%s = %v", name, got[0].Value)
}

// argoQueries are the AnalysisTemplate's queries by metric name, with args
// substituted as Argo does ({{args.NAME}}, the template's defaults for
// those not passed).
func argoQueries(t *testing.T, args map[string]string) map[string]string {
	t.Helper()
	var tmpl struct {
		Kind string
		Spec struct {
			Args []struct {
				Name  string
				Value *string
			}
			Metrics []struct {
				Name             string
				SuccessCondition string `json:"successCondition"`
				Provider         struct {
					Prometheus struct{ Address, Query string }
				}
			}
		}
	}
	if err := yaml.Unmarshal(readFile(t, "argo-analysistemplate.yaml"), &tmpl); err != nil || tmpl.Kind != "AnalysisTemplate" {
		t.Fatalf("argo-analysistemplate.yaml: kind %q, %v", tmpl.Kind, err)
	}
	values := map[string]string{}
	for _, a := range tmpl.Spec.Args {
		if v, ok := args[a.Name]; ok {
			values[a.Name] = v
		} else if a.Value != nil {
			values[a.Name] = *a.Value
		} else {
			t.Fatalf("arg %s has no default and was not passed", a.Name)
		}
	}
	out := map[string]string{}
	for _, m := range tmpl.Spec.Metrics {
		if !strings.HasPrefix(m.SuccessCondition, "len(result) == 1 && ") {
			t.Errorf("metric %s: successCondition %q does not guard len(result)", m.Name, m.SuccessCondition)
		}
		q := m.Provider.Prometheus.Query
		for k, v := range values {
			q = strings.ReplaceAll(q, "{{args."+k+"}}", v)
		}
		if strings.Contains(q, "{{") {
			t.Fatalf("metric %s: unresolved argument in %s", m.Name, q)
		}
		out[m.Name] = strings.TrimSpace(q)
	}
	checkNames(t, "argo", out, append([]string{"drainwatch-scraped"}, lossMetrics...))
	return out
}

// flaggerQueries are the MetricTemplates' queries by name, with Flagger's
// variables ({{ namespace }}, {{ target }}, {{ interval }}) substituted.
func flaggerQueries(t *testing.T, vars map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, doc := range bytes.Split(readFile(t, "flagger-metrictemplates.yaml"), []byte("\n---\n")) {
		var tmpl struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Provider struct{ Type, Address string }
				Query    string
			}
		}
		if err := yaml.Unmarshal(doc, &tmpl); err != nil {
			t.Fatal(err)
		}
		if tmpl.Kind == "" {
			continue // the leading comment
		}
		if tmpl.Kind != "MetricTemplate" || tmpl.Spec.Provider.Type != "prometheus" {
			t.Fatalf("%s: kind %q provider %q", tmpl.Metadata.Name, tmpl.Kind, tmpl.Spec.Provider.Type)
		}
		q := tmpl.Spec.Query
		for k, v := range vars {
			q = strings.ReplaceAll(q, "{{ "+k+" }}", v)
		}
		if strings.Contains(q, "{{") {
			t.Fatalf("%s: unresolved variable in %s", tmpl.Metadata.Name, q)
		}
		out[tmpl.Metadata.Name] = strings.TrimSpace(q)
	}
	want := []string{"drainwatch-scraped"}
	for _, m := range lossMetrics {
		want = append(want, flaggerNames[m])
	}
	checkNames(t, "flagger", out, want)
	return out
}

func checkNames(t *testing.T, what string, got map[string]string, want []string) {
	t.Helper()
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("%s templates %v, want %v", what, names, want)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
