package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/exporter/otlp"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/otelcol"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestOTLPExport sends a Deployment's terminations and startups to a real
// OpenTelemetry Collector (OTLP receiver, contrib file exporter) through
// four phases, each a `kubectl rollout restart` of 2 naive pods, the first
// two behind a router that follows the EndpointSlices 2 s late (the old
// pods refuse what it still sends them after their stop signal):
//
//  1. the collector up, over gRPC: every record arrives;
//  2. after an orderly daemon restart, now over HTTP, with the collector
//     stopped for the whole rollout: the exports fail and are retried; once
//     it is back, every record of the rollout arrives;
//  3. with the collector stopped again, an orderly daemon stop leaves the
//     rollout's records pending; the next start keeps records 1 ms
//     (--keep-completed), so its first prune expires exactly them: 2
//     terminations and 2 startups counted dropped (expired), none sent.
//
// The file holds each record once (by its id), the terminations' counts
// equal the API's (the daemon's) and their refusals the router's, and the
// resource carries the pod's Kubernetes attributes.
func TestOTLPExport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	col, err := otelcol.Start(ctx, filepath.Join(t.TempDir(), "otelcol"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Stop() })
	c, ds := startCluster(t, "e2o-", 1)
	node, state := ds[0].node, t.TempDir()
	ds[0].stop()
	withOTLP := func(protocol, endpoint string, keep time.Duration) func(*daemon.Config) {
		return func(cfg *daemon.Config) {
			cfg.OTLP = &otlp.Config{Endpoint: endpoint, Protocol: protocol, Insecure: true,
				RetryMin: 200 * time.Millisecond, RetryMax: time.Second}
			cfg.KeepCompleted = keep
		}
	}
	d := startDaemonWith(t, c.RestConfig, node, state, "", withOTLP(otlp.ProtocolGRPC, col.GRPCAddr(), 0))
	// The first deploy's pods must be seen before they are Ready (their
	// startups observed): deploy once the daemon has listed the node's pods.
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return d.Ready() == nil, nil }); err != nil {
		t.Fatalf("the daemon never listed its node's pods: %v", err)
	}

	ns := unique("e2e-otlp")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 2)
	dep.Spec.Strategy = oneAtATime()
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, []*nodeDaemon{d}, pods)
	sent := map[string]bool{} // record ids the collector must hold
	api := map[string]correlate.Termination{}
	expectTerminations := func(d *nodeDaemon, pods []corev1.Pod) {
		for _, p := range pods {
			term := waitComplete(ctx, t, d, string(p.UID))
			sent[otlp.TerminationID(term)], api[otlp.TerminationID(term)] = true, term
		}
	}
	routerRefused := map[string]int{}
	expectStartups := func(d *nodeDaemon, pods []corev1.Pod) {
		for _, p := range pods {
			sent[otlp.StartupID(waitStartup(ctx, t, d, string(p.UID)))] = true
		}
	}
	expectStartups(d, pods)

	// 1: the collector up.
	old := pods
	pods = otlpRollout(ctx, t, c, d, ns, old, true, routerRefused)
	expectTerminations(d, old)
	expectStartups(d, pods)
	if _, err := col.WaitLogs(ctx, len(sent)); err != nil {
		t.Fatal(err)
	}

	// 2: an orderly restart, then the collector down for a rollout.
	d.stop()
	d = startDaemonWith(t, c.RestConfig, node, state, "", withOTLP(otlp.ProtocolHTTP, "http://"+col.HTTPAddr(), 0))
	waitWatching(ctx, t, []*nodeDaemon{d}, pods)
	if err := col.Stop(); err != nil {
		t.Fatal(err)
	}
	old = pods
	pods = otlpRollout(ctx, t, c, d, ns, old, true, routerRefused)
	expectTerminations(d, old)
	expectStartups(d, pods)
	failures := counterWith(d, "drainwatch_otlp_export_failures_total", "", "")
	if failures <= 0 {
		t.Fatal("no export failed while the collector was down")
	}
	if err := col.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := col.WaitLogs(ctx, len(sent)); err != nil {
		t.Fatal(err)
	}

	// 3: pending records expire before the collector returns.
	if err := col.Stop(); err != nil {
		t.Fatal(err)
	}
	old = pods
	pods = otlpRollout(ctx, t, c, d, ns, old, false, nil)
	expired := 0
	for _, p := range old {
		waitComplete(ctx, t, d, string(p.UID))
		expired++
	}
	for _, p := range pods {
		waitStartup(ctx, t, d, string(p.UID))
		expired++
	}
	d.stop()
	d = startDaemonWith(t, c.RestConfig, node, state, "", withOTLP(otlp.ProtocolGRPC, col.GRPCAddr(), time.Millisecond))
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return counterWith(d, "drainwatch_otlp_records_dropped_total", "reason", otlp.DropExpired) >= float64(expired), nil
	})
	if err != nil {
		t.Fatalf("dropped (expired) %v, want %d: %v", counterWith(d, "drainwatch_otlp_records_dropped_total", "reason", otlp.DropExpired), expired, err)
	}
	if err := col.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the exporter's retry (at most 1 s) finds nothing to send
	if got := counterWith(d, "drainwatch_otlp_records_dropped_total", "reason", otlp.DropExpired); got != float64(expired) {
		t.Errorf("dropped (expired) %v, want %d (the last rollout's 2 terminations and 2 startups)", got, expired)
	}

	logs, err := col.Logs()
	if err != nil {
		t.Fatal(err)
	}
	checkOTLPLogs(t, logs, sent, routerRefused, ns, node, api)
}

// otlpRollout restarts the Deployment (behind a lagging router with load
// when routed, whose refusals per old pod land in refused), waits for it
// and returns the new ready pods.
func otlpRollout(ctx context.Context, t *testing.T, c *cluster.Cluster, d *nodeDaemon, ns string, old []corev1.Pod, routed bool, refused map[string]int) []corev1.Pod {
	t.Helper()
	if routed {
		rctx, stopRouter := context.WithCancel(ctx)
		r, err := c.StartRouter(rctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: routerDelay})
		if err != nil {
			stopRouter()
			t.Fatal(err)
		}
		for len(r.Backends()) != len(old) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		loadDone := startLoadFor(rctx, c, r.Addr(), 15*time.Second)
		defer func() {
			<-loadDone
			byBackend := lossByBackend(r.Conns())
			for _, p := range old {
				refused[string(p.UID)] = byBackend[cluster.PodAddr(&p, cluster.ServerPort)].refused
			}
			stopRouter()
		}()
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.ReadyPods(ctx, ns, "app=web")
	if err != nil || len(pods) != len(old) {
		t.Fatalf("ready pods after the rollout: %d, %v", len(pods), err)
	}
	for _, p := range old {
		if _, err := c.WaitTerminated(ctx, p.UID); err != nil {
			t.Fatal(err)
		}
	}
	return pods
}

// checkOTLPLogs: the collector holds exactly the records of sent, each
// once; a termination's record has the pod's resource attributes, the
// daemon's counts and the router's refusals.
func checkOTLPLogs(t *testing.T, logs []otelcol.Log, sent map[string]bool, routerRefused map[string]int, ns, node string, api map[string]correlate.Termination) {
	t.Helper()
	seen := map[string]int{}
	terms, starts := 0, 0
	for _, l := range logs {
		id, _ := l.Attributes[otlp.AttrRecordID].(string)
		seen[id]++
		if !sent[id] {
			t.Errorf("the collector holds %s (%s), which should not have been sent", id, l.EventName)
			continue
		}
		if l.Resource["k8s.namespace.name"] != ns || l.Resource["k8s.node.name"] != node ||
			l.Resource["k8s.deployment.name"] != "web" || l.Resource["service.name"] != "drainwatch" {
			t.Errorf("%s: resource %v, want namespace %s, node %s, deployment web", id, l.Resource, ns, node)
		}
		switch l.EventName {
		case otlp.EventStartup:
			starts++
		case otlp.EventTermination:
			terms++
			term, ok := api[id]
			if !ok {
				t.Errorf("%s: a termination the daemon does not list", id)
				continue
			}
			if l.Resource["k8s.pod.uid"] != term.PodUID || l.Resource["k8s.pod.name"] != term.Pod {
				t.Errorf("%s: pod %v/%v, want %s/%s", id, l.Resource["k8s.pod.name"], l.Resource["k8s.pod.uid"], term.Pod, term.PodUID)
			}
			after, before := l.Attributes["drainwatch.counts.refused_after_sigterm"], l.Attributes["drainwatch.counts.refused_before_sigterm"]
			killed := l.Attributes["drainwatch.counts.requests_killed_by_sigkill"]
			if after != int64(term.Counts.RefusedAfterSigterm) || before != int64(term.Counts.RefusedBeforeSigterm) ||
				killed != int64(term.Counts.RequestsKilledBySigkill) {
				t.Errorf("%s: refused after %v, before %v, killed %v; the API says %d, %d, %d", id, after, before, killed,
					term.Counts.RefusedAfterSigterm, term.Counts.RefusedBeforeSigterm, term.Counts.RequestsKilledBySigkill)
			}
			want, routed := routerRefused[term.PodUID]
			a, _ := after.(int64)
			b, _ := before.(int64)
			if routed && int(a+b) != want {
				t.Errorf("%s: the record says refused %d, the router refused %d", id, a+b, want)
			}
			t.Logf("%s: refused %d (router %d), marks stop_signal %v", term.Pod, a+b, want, l.Attributes["drainwatch.marks.stop_signal"])
		default:
			t.Errorf("%s: event name %q", id, l.EventName)
		}
	}
	for id := range sent {
		if seen[id] != 1 {
			t.Errorf("%s: the collector holds it %d times, want once", id, seen[id])
		}
	}
	t.Logf("the collector holds %d records (%d terminations, %d startups) for %d sent", len(logs), terms, starts, len(sent))
	if terms != 4 || starts != 6 {
		t.Errorf("%d terminations and %d startups, want 4 and 6 (two rollouts of 2 pods, and the first deploy's startups)", terms, starts)
	}
}
