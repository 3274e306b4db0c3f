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

// TestListStartups: the latest startups first, filtered, limited.
func TestListStartups(t *testing.T) {
	var src startupList
	for i, ns := range []string{"shop", "other", "shop", "shop"} {
		s := newPodStartup()
		s.PodUID, s.Pod, s.Workload.Namespace = fmt.Sprintf("uid-%d", i), fmt.Sprintf("web-%d", i), ns
		src = append(src, s)
	}
	srv := httptest.NewServer(NewServer(ServerConfig{Startups: src}).Handler())
	defer srv.Close()
	for _, tc := range []struct {
		query     string
		pods      []string
		truncated bool
	}{
		{"", []string{"web-3", "web-2", "web-1", "web-0"}, false},
		{"?namespace=shop&limit=2", []string{"web-3", "web-2"}, true},
		{"?limit=0", nil, false},
	} {
		resp, err := http.Get(srv.URL + "/api/v1/startups" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var got StartupList
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if tc.pods == nil {
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", tc.query, resp.StatusCode)
			}
			continue
		}
		var pods []string
		for _, s := range got.Startups {
			pods = append(pods, s.Pod)
		}
		if err != nil || !slices.Equal(pods, tc.pods) || got.Truncated != tc.truncated {
			t.Errorf("%s: pods %v truncated %v (%v), want %v %v", tc.query, pods, got.Truncated, err, tc.pods, tc.truncated)
		}
	}
}
