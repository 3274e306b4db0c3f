package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
)

// startupWindow is the daemons' --startup-window in these tests: long
// enough for the scenario's clients, short enough to wait for.
const startupWindow = 8 * time.Second

// TestStartups: the new pods' side, two pods on one cluster.
//
// ready-before-listening: the new pod whose readiness passes
// before it serves (lab.ReadyBeforeListening: a tcpSocket probe on a
// health port that listens at once, the traffic port 5 s after the
// start). Independent clients connect straight at the pod's traffic port
// from its first moments, each counting its own refusals; they pause from
// 2.5 s after the container's start (the probe's first run is 3 s after
// it) until 200 ms after both the API and the daemon showed the pod Ready,
// so no attempt is within 100 ms of the daemon's Ready mark (checked).
// drainwatch's refused_before_ready and refused_after_ready equal the
// clients' refusals sent before and after that mark, and its first accept
// lies within the first accepted client's connect.
//
// resets-after-ready: the same probe, a traffic port open at once whose
// server resets every request for 5.5 s after the start
// (lab.ResetsAfterReady); the clients send GET /work on each connection
// and count the connections reset instead of answered. drainwatch's
// reset_after_ready equals those sent after the Ready mark; nothing is
// refused.
func TestStartups(t *testing.T) {
	c, ds := startCluster(t, "e2st-", 1)
	// ready-before-listening restarts the daemon last: a startup that
	// overlaps the restart is partial (daemon_down), so the other runs
	// before it; the next daemon runs until this test ends.
	t.Run("resets-after-ready", func(t *testing.T) { testResetsAfterReady(t, c, ds) })
	parent := t
	t.Run("ready-before-listening", func(t *testing.T) { testReadyBeforeListening(t, parent, c, ds) })
}

// runStartup deploys dep's pod, runs the startup clients at it, and
// returns the daemon's complete startup and the clients' split of it.
func runStartup(ctx context.Context, t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, ns string, dep *appsv1.Deployment, request bool) (corev1Pod, correlate.Startup, lab.StartupSplit, *lab.StartupClients) {
	t.Helper()
	if err := c.Apply(ctx, cluster.Namespace(ns), dep); err != nil {
		t.Fatal(err)
	}
	pod, err := lab.WaitAddressed(ctx, c.Client, ns, "web")
	must(t, err)
	d := ds[0]
	waitWatching(ctx, t, ds, []corev1Pod{pod})
	uid := string(pod.UID)
	clients := &lab.StartupClients{Dial: c.Dial, Client: c.Client, Pod: pod, Request: request,
		DaemonReady: func(context.Context) time.Time { return daemonReady(d, uid) }}
	must(t, clients.Run(ctx))
	got := waitStartup(ctx, t, d, uid)
	seen, err := clients.Split(got.Marks.Ready)
	must(t, err)
	return pod, got, seen, clients
}

func testReadyBeforeListening(t, parent *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-startup")
	pod, got, seen, clients := runStartup(ctx, t, c, ds, ns, lab.ReadyBeforeListening(ns), false)
	d := ds[0]
	checkStartup(t, d, got, seen, clients)
	checkStartupEvent(ctx, t, c, pod, "StartupReadyBeforeListening",
		fmt.Sprintf("startup: %d connection attempts refused after the pod was Ready", seen.RefusedAfter))
	// A restart keeps the record: the next daemon on the state dir serves
	// it, the same (asked once it watches the pod again: its state is read
	// before).
	d.stop()
	ds[0] = startDaemon(parent, c.RestConfig, d.node, d.stateDir)
	waitWatching(ctx, t, ds, []corev1Pod{pod})
	uid := string(pod.UID)
	var again []correlate.Startup
	for _, s := range ds[0].Startups() {
		if s.PodUID == uid {
			again = append(again, s)
		}
	}
	if len(again) != 1 || again[0].Counts != got.Counts || !again[0].Marks.Ready.Equal(got.Marks.Ready) || !again[0].Complete {
		t.Errorf("after a restart the daemon serves %+v, want the startup %+v", again, got)
	}
}

func testResetsAfterReady(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-startup-resets")
	pod, got, seen, clients := runStartup(ctx, t, c, ds, ns, lab.ResetsAfterReady(ns), true)
	ready := got.Marks.Ready
	t.Logf("clients: %d attempts, reset %d before and %d after Ready (paused %v to %v around it); drainwatch %+v marks %+v resets %+v diagnoses %+v",
		seen.Attempts, seen.ResetBefore, seen.ResetAfter, clients.PauseAt.Sub(ready), clients.ResumeAt.Sub(ready),
		got.Counts, got.Marks, got.Resets, got.Diagnoses)
	// Ready comes about 3 s after the start, the resets last 5.5 s: the
	// clients meet them on both sides.
	n := got.Counts
	if n.ResetAfterReady != seen.ResetAfter || seen.ResetAfter == 0 || seen.ResetBefore == 0 {
		t.Errorf("drainwatch reset after Ready %d; the clients %d after and %d before (want equal, and both seen)",
			n.ResetAfterReady, seen.ResetAfter, seen.ResetBefore)
	}
	if n.RefusedBeforeReady != 0 || n.RefusedAfterReady != 0 || seen.RefusedBefore != 0 || seen.RefusedAfter != 0 || n.ProbeRefused != 0 || got.Partial {
		t.Errorf("refused %+v (clients %d, %d), partial %v: want none (the port listens at once), complete",
			n, seen.RefusedBefore, seen.RefusedAfter, got.PartialReasons)
	}
	checkFirstAccept(t, got, seen.First)
	// The pod's socket sends each RST after closing has given its port
	// back (SO_LINGER 0): the port is still the traffic port's.
	wantMsg := fmt.Sprintf("%d client connections reset by the pod after it was Ready: the first on port %d, ", seen.ResetAfter, cluster.ServerPort)
	if len(got.Diagnoses) != 1 || got.Diagnoses[0].Code != correlate.DiagReadyBeforeServing || !strings.HasPrefix(got.Diagnoses[0].Message, wantMsg) {
		t.Errorf("diagnoses %+v, want %s %q…", got.Diagnoses, correlate.DiagReadyBeforeServing, wantMsg)
	}
	for _, r := range got.Resets {
		if r.Port != cluster.ServerPort || !r.Socket {
			t.Errorf("reset %+v: want port %d, sent by a socket", r, cluster.ServerPort)
		}
	}
	if v := counterSum(ds[0], "drainwatch_connections_reset_after_ready_total", got.Namespace); v != float64(seen.ResetAfter) {
		t.Errorf("drainwatch_connections_reset_after_ready_total %v, want %d", v, seen.ResetAfter)
	}
	checkStartupEvent(ctx, t, c, pod, "StartupReadyBeforeServing",
		fmt.Sprintf("startup: %d client connections reset by the pod after it was Ready", seen.ResetAfter))
}

func checkStartup(t *testing.T, d *nodeDaemon, got correlate.Startup, seen lab.StartupSplit, clients *lab.StartupClients) {
	t.Helper()
	ready := got.Marks.Ready
	t.Logf("clients: %d attempts, refused %d before and %d after Ready (paused %v to %v around it); drainwatch %+v marks %+v listeners %+v diagnoses %+v",
		seen.Attempts, seen.RefusedBefore, seen.RefusedAfter, clients.PauseAt.Sub(ready), clients.ResumeAt.Sub(ready),
		got.Counts, got.Marks, got.Listeners, got.Diagnoses)
	n := got.Counts
	before, after := seen.RefusedBefore, seen.RefusedAfter
	if n.RefusedBeforeReady != before || n.RefusedAfterReady != after || before == 0 || after == 0 {
		t.Errorf("drainwatch refused before Ready %d, after %d; the clients %d and %d (want equal, and both seen)",
			n.RefusedBeforeReady, n.RefusedAfterReady, before, after)
	}
	if n.ResetAfterReady != 0 || n.ProbeRefused != 0 || got.Partial {
		t.Errorf("reset after Ready %d %+v, probes refused %d, partial %v: want 0, 0 (the probe's port listened before its first run), complete",
			n.ResetAfterReady, got.Resets, n.ProbeRefused, got.PartialReasons)
	}
	checkFirstAccept(t, got, seen.First)
	if len(got.Diagnoses) != 1 || got.Diagnoses[0].Code != correlate.DiagReadyBeforeListening {
		t.Errorf("diagnoses %+v, want %s", got.Diagnoses, correlate.DiagReadyBeforeListening)
	}
	if got.Workload.Kind != "Deployment" || got.Workload.Name != "web" || got.Workload.Revision != "1" {
		t.Errorf("workload %+v, want Deployment web revision 1", got.Workload)
	}
	if v := counterSum(d, "drainwatch_connections_refused_after_ready_total", got.Namespace); v != float64(after) {
		t.Errorf("drainwatch_connections_refused_after_ready_total %v, want %d", v, after)
	}
	if v := counterSum(d, "drainwatch_connections_refused_before_ready_total", got.Namespace); v != float64(before) {
		t.Errorf("drainwatch_connections_refused_before_ready_total %v, want %d", v, before)
	}
}

// checkStartupEvent: the pod has one Warning of reason from drainwatch,
// whose message begins with want (the clients' count).
func checkStartupEvent(ctx context.Context, t *testing.T, c *cluster.Cluster, pod corev1Pod, reason, want string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got = nil
		for _, ev := range list.Items {
			if ev.Source.Component == exporter.EventComponent && ev.InvolvedObject.UID == pod.UID {
				got = append(got, fmt.Sprintf("%s ×%d: %s", ev.Reason, max(ev.Count, 1), ev.Message))
			}
		}
		return len(got) > 0, nil
	})
	if err != nil || len(got) != 1 || !strings.HasPrefix(got[0], reason+" ×1: "+want) {
		t.Errorf("drainwatch's Events on %s: %q (%v), want one %s ×1 %q…", pod.Name, got, err, reason, want)
	}
}

// checkFirstAccept: the daemon's first accept is the first accepted
// client's connection, between its send and its connect's return (the
// kernel's wall clock is converted from the monotonic one once: 5 ms of
// slack), and ready_to_first_accept is it minus Ready.
func checkFirstAccept(t *testing.T, got correlate.Startup, first *lab.Attempt) {
	t.Helper()
	fa := got.Marks.FirstAccept
	const slack = 5 * time.Millisecond
	if first == nil {
		t.Fatalf("no client was accepted; drainwatch's first accept %v", fa)
	}
	if fa.Before(first.Sent.Add(-slack)) || fa.After(first.Done.Add(slack)) {
		t.Errorf("first accept %v; the first accepted client sent at %v, connected at %v", fa, first.Sent, first.Done)
	}
	if got.ReadyToFirstAccept != fa.Sub(got.Marks.Ready) || got.ReadyToFirstAccept <= 0 {
		t.Errorf("ready_to_first_accept %v, want first accept − Ready = %v", got.ReadyToFirstAccept, fa.Sub(got.Marks.Ready))
	}
}

// daemonReady is the Ready mark of the daemon's startup of uid so far.
func daemonReady(d *nodeDaemon, uid string) time.Time {
	for _, s := range d.Startups() {
		if s.PodUID == uid {
			return s.Marks.Ready
		}
	}
	return time.Time{}
}

// waitStartup waits for the daemon's complete startup of uid.
func waitStartup(ctx context.Context, t *testing.T, d *nodeDaemon, uid string) correlate.Startup {
	t.Helper()
	var got correlate.Startup
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, s := range d.Startups() {
			if s.PodUID == uid && s.Complete {
				got = s
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no complete startup of %s on %s: %v", uid, d.node, err)
	}
	return got
}
