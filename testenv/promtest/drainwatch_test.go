package promtest

import (
	"context"
	"net"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
)

// TestPrometheusScrapesDrainwatch: the real Prometheus scrapes drainwatch's
// /metrics after a termination that refused 44 connections, killed 1
// request, reset 6 at shutdown and refused 4 probes, and a partial one;
// reads every count back exactly, and the alerts of
// deploy/prometheus/alerts.yaml fire for that revision.
func TestPrometheusScrapesDrainwatch(t *testing.T) {
	m := exporter.NewMetrics(exporter.Options{})
	t0 := time.Now()
	m.ObserveTermination(correlate.Termination{PodUID: "uid-a", Pod: "web-a", PodIP: netip.MustParseAddr("10.0.0.7"),
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"},
		Marks:    correlate.Marks{StopSignal: t0, Exit: t0.Add(time.Second)},
		Counts:   correlate.Counts{RefusedAfterSigterm: 44, RequestsKilledBySigkill: 1, ConnectionsResetAtShutdown: 6, ProbeRefused: 4},
		Outcome:  correlate.OutcomeRefusedAndKilled, Complete: true})
	m.ObserveTermination(correlate.Termination{PodUID: "uid-b", Pod: "web-b", PodIP: netip.MustParseAddr("10.0.0.8"),
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"},
		Marks:    correlate.Marks{StopSignal: t0, Exit: t0.Add(time.Second)}, Outcome: "partial", Complete: true,
		Partial: true, PartialReasons: []string{"daemon_down", "probe_unavailable:tcp_send_reset"}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(exporter.NewServer(exporter.ServerConfig{Metrics: m, Log: zerolog.Nop()}).Handler())
	srv.Listener = l
	srv.Start()
	defer srv.Close()

	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	prom := StartWithRules(t, []string{filepath.Join(root, "deploy", "prometheus", "alerts.yaml")}, l.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nonEmpty := func(s []Sample) bool { return len(s) > 0 }
	for expr, want := range map[string]float64{
		`sum(drainwatch_connections_refused_after_sigterm_total{workload="web",revision="3"})`: 44,
		`sum(drainwatch_requests_killed_by_sigkill_total{workload="web",revision="3"})`:        1,
		`sum(drainwatch_terminations_total{outcome="refused_and_killed"})`:                     1,
		`sum(drainwatch_connections_reset_at_shutdown_total{workload="web",revision="3"})`:     6,
		`sum(drainwatch_probe_connections_refused_total{workload="web",revision="3"})`:         4,
		`sum(drainwatch_terminations_partial_total{workload="web"})`:                           2,
		`sum(drainwatch_terminations_partial_total{reason="probe_unavailable"})`:               1,
	} {
		got, err := prom.QueryWhen(ctx, expr, nonEmpty)
		if err != nil || len(got) != 1 || got[0].Value != want {
			t.Errorf("%s = %+v (%v), want %v\n%s", expr, got, err, want, prom.Log())
		}
	}
	firing := `ALERTS{alertstate="firing",workload="web",revision="3"}`
	got, err := prom.QueryWhen(ctx, firing, func(s []Sample) bool { return len(s) == 3 })
	if err != nil {
		t.Fatalf("%v\n%s", err, prom.Log())
	}
	names := map[string]bool{}
	for _, s := range got {
		names[s.Labels["alertname"]] = true
	}
	if !names["DrainwatchConnectionsRefusedAfterSigterm"] || !names["DrainwatchRequestsKilledBySigkill"] ||
		!names["DrainwatchConnectionsResetAtShutdown"] {
		t.Errorf("firing alerts %v, want refused, killed and reset at shutdown", names)
	}
}
