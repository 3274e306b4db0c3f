package daemon

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// TestLogTerminationCarriesEveryCount: the one line per termination has
// every count, the stop signal the runtime sent and the API's when they
// differ, the node-local sources and the partial reasons.
func TestLogTerminationCarriesEveryCount(t *testing.T) {
	var buf bytes.Buffer
	stop := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	logTermination(zerolog.New(&buf), correlate.Termination{
		PodUID: "uid-p", Pod: "web-p", Outcome: "partial",
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"},
		Counts: correlate.Counts{RefusedAfterSigterm: 44, RefusedBeforeSigterm: 1, RequestsKilledBySigkill: 2,
			InflightAtStopSignal: 2, AcceptedAfterEndpointsNotReady: 3, ConnectionsResetAtExit: 5,
			ConnectionsResetAtShutdown: 6, StreamsKilledBySigkill: 1, ProbeRefused: 4, RequestsResetOnReusedConnections: 7,
			RequestsKilledAtExit: 8},
		Death: correlate.Death{Kind: correlate.DeathStopSignal},
		Marks: correlate.Marks{StopSignal: stop}, StopSignal: 3, StopSignalAPI: 15,
		Sources: []correlate.Source{{Comm: "kubelet", Probe: true, Accepted: 2, Refused: 4}, {Comm: "envoy", Accepted: 10}},
		Partial: true, PartialReasons: []string{"daemon_down"},
	})
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"level": "info", "message": "termination complete",
		"namespace": "shop", "pod": "web-p", "pod_uid": "uid-p", "workload_kind": "Deployment", "workload": "web", "revision": "3",
		"outcome": "partial", "refused_after_sigterm": 44.0, "refused_before_sigterm": 1.0, "requests_killed_by_sigkill": 2.0,
		"requests_killed_at_exit": 8.0, "death": "stop_signal",
		"inflight_at_stop_signal": 2.0, "accepted_after_endpoints_not_ready": 3.0, "connections_reset_at_exit": 5.0,
		"connections_reset_at_shutdown": 6.0, "streams_killed_by_sigkill": 1.0, "probe_refused": 4.0,
		"requests_reset_on_reused_connections": 7.0,
		"exit_code":                            0.0, "diagnoses": []any{}, "stop_signal": "SIGQUIT", "stop_signal_api": "SIGTERM",
		"sources": "kubelet (probe) 4 refused 2 accepted; envoy 10 accepted", "partial": true, "partial_reasons": []any{"daemon_down"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("log line (-want +got):\n%s", d)
	}
}
