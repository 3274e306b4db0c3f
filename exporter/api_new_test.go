package exporter

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// TestAPICarriesProbesResetsSources: the JSON of a termination carries
// the probe refusals, the shutdown's resets, the killed streams, the API's
// stop signal, the node-local sources and which plotted attempts were
// probes, under the names clients read.
func TestAPICarriesProbesResetsSources(t *testing.T) {
	s := NewServer(ServerConfig{Source: fakeSource{probedTermination()}, Log: zerolog.Nop(), Now: func() time.Time { return at(60) }})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	code, body := get(t, ts.URL+"/api/v1/terminations/uid-p")
	var v struct {
		Counts        map[string]int   `json:"counts"`
		StopSignal    int              `json:"stop_signal"`
		StopSignalAPI int              `json:"stop_signal_api"`
		Sources       []map[string]any `json:"sources"`
		Connections   []map[string]any `json:"connections"`
		Partial       []string         `json:"partial_reasons"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("%d %v %s", code, err, body)
	}
	wantCounts := map[string]int{"refused_after_sigterm": 44, "refused_before_sigterm": 0, "requests_killed_by_sigkill": 2, "requests_killed_at_exit": 0,
		"inflight_at_stop_signal": 0, "accepted_after_endpoints_not_ready": 0, "connections_reset_at_exit": 0,
		"connections_reset_at_shutdown": 6, "streams_killed_by_sigkill": 1, "probe_refused": 4,
		"requests_reset_on_reused_connections": 0, "connections_blackholed": 0}
	wantSources := []map[string]any{{"comm": "kubelet", "probe": true, "accepted": 2.0, "refused": 4.0},
		{"comm": "envoy", "accepted": 10.0, "refused": 0.0}}
	probes := 0
	for _, c := range v.Connections {
		if c["probe"] == true {
			probes++
		}
	}
	if d := cmp.Diff(wantCounts, v.Counts); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantSources, v.Sources); d != "" {
		t.Errorf("sources (-want +got):\n%s", d)
	}
	if v.StopSignal != 3 || v.StopSignalAPI != 15 || probes != 2 || len(v.Connections) != 5 ||
		!cmp.Equal(v.Partial, []string{"daemon_down", "probe_unavailable:tcp_send_reset", "something_new"}) {
		t.Errorf("stop signal %d, API's %d, %d of %d plotted attempts probes, partial %v; want 3, 15, 2 of 5",
			v.StopSignal, v.StopSignalAPI, probes, len(v.Connections), v.Partial)
	}
}
