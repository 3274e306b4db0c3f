package e2e_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// exitSlow is how many slow requests each server holds at its deletion.
const exitSlow = 4

// exitCase is a server that dies with requests in flight without a
// SIGKILL (the grace period, 30 s, is longer than anything here).
type exitCase struct {
	name  string
	dep   func(ns string) *appsv1.Deployment
	exit  int32  // the container init's exit code
	death string // correlate.Death kind
	comm  string // the process that died with the requests
	diag  string
}

// TestRequestsKilledAtExit: real runtimes with readiness probes on, four
// slow requests in flight each when the pod is deleted, and no SIGKILL.
// drainwatch's requests_killed_at_exit equals what the clients lost (an
// empty reply or a reset), exactly, with the outcome killed, the
// diagnosis of how the server died and the metric.
func TestRequestsKilledAtExit(t *testing.T) {
	c, ds := startCluster(t, "e2k-", 1)
	node := t.TempDir()
	for _, tc := range []exitCase{
		{name: "go-no-handler", exit: 2, death: correlate.DeathNoDrain, comm: "dwserver", diag: correlate.DiagStopSignalKills,
			dep: func(ns string) *appsv1.Deployment {
				return cluster.ServerDeployment(ns, "web", workload.ModeNoHandler, 1)
			}},
		{name: "go-shutdown-short", exit: 1, death: correlate.DeathAfterShutdown, comm: "dwserver", diag: correlate.DiagExitedInflight,
			dep: func(ns string) *appsv1.Deployment {
				return cluster.ServerDeployment(ns, "web", workload.ModeShutdownShort, 1, "--drain-delay=1s", "--shutdown-timeout=1s")
			}},
		{name: "node-under-tini", exit: 143, death: correlate.DeathStopSignal, comm: "node", diag: correlate.DiagStopSignalKills,
			dep: func(ns string) *appsv1.Deployment { return nodeDeployment(t, ns, node) }},
	} {
		t.Run(tc.name, func(t *testing.T) { killedAtExit(t, c, ds, tc) })
	}
}

func killedAtExit(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, tc exitCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-exit-" + tc.name)
	pods := deploy(ctx, t, c, ns, tc.dep(ns))
	waitWatching(ctx, t, ds, pods)
	victim := &pods[0]
	slow, waitSlow := startSlow(ctx, c, cluster.PodAddr(victim, cluster.ServerPort), exitSlow)
	if err := c.DeletePod(ctx, ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	waitSlow()
	d := daemonOf(t, ds, victim)
	got := waitComplete(ctx, t, d, string(victim.UID))
	seen := client.Summarize(slow)
	lost := seen[client.EOF] + seen[client.Reset]
	metric := counterSum(d, "drainwatch_requests_killed_at_exit_total", ns)
	t.Logf("clients %s; drainwatch %+v exit %d death %+v outcome %s %v; metric %v; marks %+v",
		seen, got.Counts, got.ExitCode, got.Death, got.Outcome, codes(got), metric, got.Marks)
	for _, d := range got.Diagnoses {
		t.Logf("diagnosis %s: %s (fix: %s)", d.Code, d.Message, d.Fix)
	}
	n := got.Counts
	if lost != exitSlow || n.RequestsKilledAtExit != lost || n.InflightAtStopSignal != lost || n.RequestsKilledBySigkill != 0 {
		t.Errorf("clients lost %d of %d (%s); drainwatch killed at exit %d, in flight at the stop signal %d, by SIGKILL %d: want %d, %d, %d, 0",
			lost, exitSlow, seen, n.RequestsKilledAtExit, n.InflightAtStopSignal, n.RequestsKilledBySigkill, exitSlow, exitSlow, exitSlow)
	}
	if metric != float64(lost) {
		t.Errorf("drainwatch_requests_killed_at_exit_total{namespace=%q} = %v, want %d", ns, metric, lost)
	}
	if got.ExitCode != tc.exit || got.Death.Kind != tc.death || got.Death.Comm != tc.comm || !got.Marks.Sigkill.IsZero() {
		t.Errorf("exit %d, death %+v, sigkill %v: want exit %d, death %s of %s, no SIGKILL",
			got.ExitCode, got.Death, got.Marks.Sigkill, tc.exit, tc.death, tc.comm)
	}
	if got.Outcome != correlate.OutcomeKilled || !slices.Contains(codes(got), tc.diag) || slices.Contains(codes(got), correlate.DiagClean) {
		t.Errorf("outcome %s, diagnoses %v: want killed with %s, not clean", got.Outcome, codes(got), tc.diag)
	}
}

// nodeDeployment runs Debian's Node.js under Debian's tini (the container's
// PID 1, forwarding the stop signal) with a server that has no SIGTERM
// handler; its readiness probe is on /ready.
func nodeDeployment(t *testing.T, ns, dir string) *appsv1.Deployment {
	argv, err := workload.NodeHTTP{Dir: dir, Addr: ":" + strconv.Itoa(cluster.ServerPort)}.Write()
	if err != nil {
		t.Fatal(err)
	}
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
	ct := &dep.Spec.Template.Spec.Containers[0]
	ct.Image, ct.Args = "local:"+argv[0], argv[1:]
	return dep
}
