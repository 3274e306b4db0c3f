package exporter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

func newPodStartup() correlate.Startup {
	return correlate.Startup{PodUID: "uid-new", Namespace: "shop", Pod: "web-new", Complete: true,
		Workload:           collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "4"},
		Marks:              correlate.StartupMarks{Ready: at(0), FirstAccept: at(3), WindowEnd: at(60)},
		Counts:             correlate.StartupCounts{RefusedAfterReady: 39, RefusedBeforeReady: 5, ResetAfterReady: 2, ProbeRefused: 1},
		ReadyToFirstAccept: 3 * time.Second}
}

const wantStartup = `
# HELP drainwatch_connections_refused_after_ready_total Client connection attempts refused (no socket) by new pods in the window after the daemon saw them Ready: the readiness probe passed before what serves the traffic listened.
# TYPE drainwatch_connections_refused_after_ready_total counter
drainwatch_connections_refused_after_ready_total{namespace="shop",revision="4",workload="web",workload_kind="Deployment"} 39
# HELP drainwatch_connections_refused_before_ready_total Client connection attempts refused by new pods before the daemon saw them Ready (traffic straight at a pod not Ready yet).
# TYPE drainwatch_connections_refused_before_ready_total counter
drainwatch_connections_refused_before_ready_total{namespace="shop",revision="4",workload="web",workload_kind="Deployment"} 5
# HELP drainwatch_connections_reset_after_ready_total Client connections new pods reset in the window after the daemon saw them Ready.
# TYPE drainwatch_connections_reset_after_ready_total counter
drainwatch_connections_reset_after_ready_total{namespace="shop",revision="4",workload="web",workload_kind="Deployment"} 2
# HELP drainwatch_ready_to_first_accept_seconds New pods: the daemon seeing the pod Ready to its first accepted client connection (how long routing takes to add a pod).
# TYPE drainwatch_ready_to_first_accept_seconds histogram
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.05"} 0
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.1"} 0
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.25"} 0
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.5"} 0
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="1"} 0
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="2"} 0
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="3"} 1
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="5"} 1
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="10"} 1
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="30"} 1
drainwatch_ready_to_first_accept_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="+Inf"} 1
drainwatch_ready_to_first_accept_seconds_sum{namespace="shop",workload="web",workload_kind="Deployment"} 3
drainwatch_ready_to_first_accept_seconds_count{namespace="shop",workload="web",workload_kind="Deployment"} 1
`

// TestObserveStartup: a startup counts once into its revision's series and
// survives a restart through the saved counters.
func TestObserveStartup(t *testing.T) {
	m := NewMetrics(Options{Now: func() time.Time { return at(70) }})
	if !m.ObserveStartup(newPodStartup()) || m.ObserveStartup(newPodStartup()) {
		t.Fatal("ObserveStartup did not count once")
	}
	names := []string{"drainwatch_connections_refused_after_ready_total", "drainwatch_connections_refused_before_ready_total",
		"drainwatch_connections_reset_after_ready_total", "drainwatch_ready_to_first_accept_seconds"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(wantStartup), names...); err != nil {
		t.Error(err)
	}
	restored := NewMetrics(Options{Now: func() time.Time { return at(80) }})
	if err := restored.RestoreCounters(m.Counters()); err != nil {
		t.Fatal(err)
	}
	if restored.ObserveStartup(newPodStartup()) {
		t.Error("a restored startup counted again")
	}
	if err := testutil.GatherAndCompare(restored.Registry(), strings.NewReader(wantStartup), names...); err != nil {
		t.Error(err)
	}
}

type startupList []correlate.Startup

func (l startupList) Startups() []correlate.Startup { return l }

// TestListStartups: the latest startups first, filtered by namespace,
// workload, pod, revision and since (a window that ended at or after it,
// or one still open), limited.
func TestListStartups(t *testing.T) {
	var src startupList
	for i, r := range []struct {
		ns, workload, revision string
		windowEnd              float64 // 0: in progress
	}{{"shop", "web", "4", 60}, {"other", "web", "4", 60}, {"shop", "api", "4", 60}, {"shop", "web", "5", 200}, {"shop", "web", "5", 0}} {
		s := newPodStartup()
		s.PodUID, s.Pod = fmt.Sprintf("uid-%d", i), fmt.Sprintf("web-%d", i)
		s.Workload.Namespace, s.Workload.Name, s.Workload.Revision = r.ns, r.workload, r.revision
		s.Complete, s.Marks.WindowEnd = r.windowEnd != 0, time.Time{}
		if s.Complete {
			s.Marks.WindowEnd = at(r.windowEnd)
		}
		src = append(src, s)
	}
	srv := httptest.NewServer(NewServer(ServerConfig{Startups: src}).Handler())
	defer srv.Close()
	since := func(seconds float64) string { return "?since=" + at(seconds).Format(time.RFC3339Nano) }
	for _, tc := range []struct {
		query     string
		pods      []string
		truncated bool
	}{
		{"", []string{"web-4", "web-3", "web-2", "web-1", "web-0"}, false},
		{"?namespace=shop&limit=2", []string{"web-4", "web-3"}, true},
		{"?workload=api", []string{"web-2"}, false},
		{"?pod=web-1", []string{"web-1"}, false},
		{"?revision=5", []string{"web-4", "web-3"}, false},
		{"?namespace=shop&workload=web&revision=4", []string{"web-0"}, false},
		{since(100), []string{"web-4", "web-3"}, false},
		{since(60), []string{"web-4", "web-3", "web-2", "web-1", "web-0"}, false},
		{"?pod=web-9", []string{}, false},
		{"?limit=0", nil, false},
		{"?since=-5m", nil, false},
	} {
		pods, truncated, status := listStartups(t, srv.URL+"/api/v1/startups"+tc.query)
		if tc.pods == nil {
			if status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", tc.query, status)
			}
			continue
		}
		if status != http.StatusOK || !slices.Equal(pods, tc.pods) || truncated != tc.truncated {
			t.Errorf("%s: status %d, pods %v truncated %v; want 200, %v %v", tc.query, status, pods, truncated, tc.pods, tc.truncated)
		}
	}
}

// TestListStartupsBounded: a list holds MaxPageSize startups at most,
// whatever limit asks for, like a page of terminations.
func TestListStartupsBounded(t *testing.T) {
	srv := httptest.NewServer(NewServer(ServerConfig{Startups: manyStartups(MaxPageSize + 1)}).Handler())
	defer srv.Close()
	pods, truncated, status := listStartups(t, srv.URL+"/api/v1/startups?limit=100000")
	if status != http.StatusOK || len(pods) != MaxPageSize || pods[0] != "web-500" || !truncated {
		t.Errorf("status %d, %d startups from %v, truncated %v; want 200, 500 from web-500, true", status, len(pods), pods[:1], truncated)
	}
}

// manyStartups are n startups of shop/web, web-0 the oldest.
func manyStartups(n int) startupList {
	src := make(startupList, n)
	for i := range src {
		src[i] = newPodStartup()
		src[i].PodUID, src[i].Pod, src[i].Marks.Created = fmt.Sprintf("uid-%d", i), fmt.Sprintf("web-%d", i), at(float64(i))
	}
	return src
}

// listStartups GETs a startups list: its pods in order, its truncated
// flag and the status.
func listStartups(t *testing.T, u string) ([]string, bool, int) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got StartupList
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("%s: %v", u, err)
	}
	pods := []string{}
	for _, s := range got.Startups {
		pods = append(pods, s.Pod)
	}
	return pods, got.Truncated, resp.StatusCode
}
