package advise

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/drainwatch/drainwatch/testenv/promtest"
)

var inf = math.Inf(1)

// buckets writes cumulative counts over the routing-lag bounds
// (exporter/histogram.go) and +Inf.
func buckets(counts ...int) []Bucket {
	bounds := []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, inf}
	bs := make([]Bucket, len(counts))
	for i, n := range counts {
		bs[i] = Bucket{LE: bounds[i], Count: n}
	}
	return bs
}

func s(v float64) Seconds { return Seconds(v * float64(time.Second)) }

// The percentile is the upper bound of the bucket holding the nearest
// rank, never interpolated; in +Inf it is the last bound, named in Above.
func TestBucketStat(t *testing.T) {
	for _, c := range []struct {
		name string
		bs   []Bucket
		p    float64
		want Stat
	}{
		{"empty", nil, 99, Stat{}},
		{"all zero", buckets(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 99, Stat{}},
		// 5 samples: p99's rank is ⌈4.95⌉ = 5 (le 2), p50's ⌈2.5⌉ = 3 (le 0.5).
		{"five", buckets(0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5), 99, Stat{N: 5, P50: s(0.5), P: s(2), Max: s(2)}},
		// 200 samples, one in +Inf: p99's rank 198 is in le=10 (199).
		{"max past the last bound", buckets(0, 0, 0, 0, 0, 0, 0, 100, 199, 199, 200), 99,
			Stat{N: 200, P50: s(5), P: s(10), Max: s(30), Above: []string{AboveMax}}},
		{"percentile past the last bound", buckets(0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 3), 99,
			Stat{N: 3, P50: s(5), P: s(30), Max: s(30), Above: []string{AboveP, AboveMax}}},
		// Counts out of order (an estimate lower than the bucket below)
		// are made non-decreasing.
		{"unsorted and uneven", []Bucket{{inf, 4}, {1, 3}, {0.5, 4}, {0.1, 1}}, 50, Stat{N: 4, P50: s(0.5), P: s(0.5), Max: s(0.5)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, bucketStat(c.bs, c.p)); diff != "" {
				t.Errorf("bucketStat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdviseHistograms(t *testing.T) {
	ref := WorkloadRef{Namespace: "shop", Kind: "Deployment", Name: "web"}
	lag := buckets(0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5) // p99 2 s
	for _, c := range []struct {
		name        string
		h           Histograms
		enough      bool
		sleep, term int64
		why         string
	}{
		// ⌈2 + 1⌉ = 3; 3 + ⌈5 + 1⌉ = 9.
		{"enough", Histograms{Workload: ref, RoutingLag: lag, Drain: buckets(0, 0, 0, 0, 0, 0, 0, 5, 5, 5, 5)}, true, 3, 9, "preStop sleep 3 s"},
		{"too few", Histograms{Workload: ref, RoutingLag: buckets(0, 1, 2), Drain: buckets(0, 2)}, false, 0, 0, "too few terminations to advise: routing lag measured in 2, drain in 2"},
		{"drain past the last bound", Histograms{Workload: ref, RoutingLag: lag, Drain: buckets(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5)}, false, 0, 0,
			"p99 drain is above the histogram's last bucket bound 30.000s: nothing advised"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := AdviseHistograms([]Histograms{c.h}, DefaultRule)[0]
			if a.Enough != c.enough || a.PrestopSleepSeconds != c.sleep || a.TerminationGraceSeconds != c.term || len(a.Why) == 0 || !strings.HasPrefix(a.Why[0], c.why) {
				t.Errorf("enough %v, sleep %d, grace %d, why %q; want %v, %d, %d, %q…", a.Enough, a.PrestopSleepSeconds, a.TerminationGraceSeconds, a.Why, c.enough, c.sleep, c.term, c.why)
			}
			if a.From != FromPrometheus || len(a.Sources) != 0 || !strings.HasPrefix(a.Notes[0], "from Prometheus: the shipped histograms carry no per-source routing lag") {
				t.Errorf("from %q, sources %v, notes %q: want prometheus, none, the histograms' note first", a.From, a.Sources, a.Notes)
			}
		})
	}
}

// fakeAPI answers each query with the series responses holds under the
// query's kind (exact, resets or increase) and metric: "exact METRIC".
func fakeAPI(t *testing.T, responses map[string][]map[string]string) (v1.API, *[]string) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		queries = append(queries, q)
		metric, _, _ := strings.Cut(q[strings.Index(q, "drainwatch_"):], "{")
		result := []any{}
		for _, s := range responses[queryKind(q)+" "+metric] {
			labels := map[string]string{}
			for k, v := range s {
				if k != "value" {
					labels[k] = v
				}
			}
			result = append(result, map[string]any{"metric": labels, "value": []any{1, s["value"]}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	}))
	t.Cleanup(srv.Close)
	client, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(client), &queries
}

func queryKind(q string) string {
	switch {
	case strings.Contains(q, "increase("):
		return "increase"
	case strings.HasPrefix(q, "count"):
		return "resets"
	}
	return "exact"
}

func wl(more ...string) map[string]string {
	m := map[string]string{"namespace": "shop", "workload_kind": "Deployment", "workload": "web"}
	for i := 0; i+1 < len(more); i += 2 {
		m[more[i]] = more[i+1]
	}
	return m
}

// A counter that reset in the window takes increase()'s estimate, rounded,
// for its group only, and the advice says how many series were estimated.
func TestReadHistogramsEstimatesResetSeries(t *testing.T) {
	apiClient, queries := fakeAPI(t, map[string][]map[string]string{
		"exact " + terminationsTotal:    {wl("cause", "rollout", "value", "4"), wl("cause", "container_restart", "value", "1")},
		"resets " + terminationsTotal:   {wl("cause", "rollout", "value", "2")},
		"increase " + terminationsTotal: {wl("cause", "rollout", "value", "6.6"), wl("cause", "container_restart", "value", "1.2")},
		"exact " + reuseOutsideTotal:    {wl("value", "0")},
	})
	now := time.Unix(1_800_000_000, 0)
	hs, _, err := ReadHistograms(context.Background(), apiClient, Scope{Namespace: "shop"}, Window{Start: now.Add(-time.Hour), End: now})
	if err != nil {
		t.Fatal(err)
	}
	// rollout: the estimate 6.6 rounds to 7; container_restart did not reset: 1.
	want := []Histograms{{Workload: WorkloadRef{"shop", "Deployment", "web"}, Terminations: 7, ContainerRestarts: 1, EstimatedSeries: 2}}
	if diff := cmp.Diff(want, hs); diff != "" {
		t.Errorf("ReadHistograms (-want +got):\n%s\nqueries:\n%s", diff, strings.Join(*queries, "\n"))
	}
	a := AdviseHistograms(hs, DefaultRule)[0]
	if last := a.Notes[len(a.Notes)-1]; !strings.HasPrefix(last, "2 series' counters reset in the window") {
		t.Errorf("last note %q, want the estimate's", last)
	}
}

// The queries parse (Prometheus' own promtool), select only series the
// exporter serves, and count from the window's start without extrapolation.
func TestPrometheusQueries(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	w := Window{Start: now.Add(-90 * time.Second).Add(-time.Microsecond), End: now}
	q := QueriesFor(routingLagBuckets, "", Scope{Namespace: "shop", Kind: "Deployment", Name: "web"}, w, "le")
	sel := `drainwatch_routing_lag_seconds_bucket{namespace="shop", workload_kind="Deployment", workload="web"}`
	want := Queries{
		Exact:    "sum by (namespace, workload_kind, workload, le) (last_over_time(" + sel + "[90001ms]) - (last_over_time(" + sel + "[5m] offset 90001ms) or last_over_time(" + sel + "[90001ms]) * 0))",
		Resets:   "count by (namespace, workload_kind, workload, le) (resets(" + sel + "[90001ms]) > 0 or last_over_time(" + sel + "[5m] offset 90001ms) > min_over_time(" + sel + "[90001ms]))",
		Increase: "sum by (namespace, workload_kind, workload, le) (increase(" + sel + "[90001ms]))",
	}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("QueriesFor (-want +got):\n%s", diff)
	}
	exported, err := promtest.ExportedNames()
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, c := range countedMetrics {
		q := QueriesFor(c.metric, c.match, Scope{}, w, c.by...)
		for _, e := range []string{q.Exact, q.Resets, q.Increase} {
			for _, name := range promtest.MetricNames(e) {
				if !exported[name] {
					t.Errorf("%s: %s is not a series drainwatch exports", e, name)
				}
			}
			exprs = append(exprs, e)
		}
	}
	promtest.CheckQueries(t, exprs)
}
