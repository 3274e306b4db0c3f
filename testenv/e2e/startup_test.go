package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestReadyBeforeListening: the new pod whose readiness passes
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
func TestReadyBeforeListening(t *testing.T) {
	c, ds := startCluster(t, "e2st-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-startup")
	if err := c.Apply(ctx, cluster.Namespace(ns), lab.ReadyBeforeListening(ns)); err != nil {
		t.Fatal(err)
	}
	pod, err := lab.WaitAddressed(ctx, c.Client, ns, "web")
	must(t, err)
	d := ds[0]
	waitWatching(ctx, t, ds, []corev1Pod{pod})
	uid := string(pod.UID)
	clients := &lab.StartupClients{Dial: c.Dial, Client: c.Client, Pod: pod,
		DaemonReady: func(context.Context) time.Time { return daemonReady(d, uid) }}
	must(t, clients.Run(ctx))
	got := waitStartup(ctx, t, d, uid)
	seen, err := clients.Split(got.Marks.Ready)
	must(t, err)
	checkStartup(t, d, got, seen, clients)
	checkStartupEvent(ctx, t, c, pod, seen.RefusedAfter)
	// A restart keeps the record: the next daemon on the state dir serves
	// it, the same (asked once it watches the pod again: its state is read
	// before).
	d.stop()
	ds[0] = startDaemon(t, c.RestConfig, d.node, d.stateDir)
	waitWatching(ctx, t, ds, []corev1Pod{pod})
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

// checkStartupEvent: the pod has one StartupReadyBeforeListening Warning
// from drainwatch, naming the clients' count of refusals after Ready.
func checkStartupEvent(ctx context.Context, t *testing.T, c *cluster.Cluster, pod corev1Pod, after int) {
	t.Helper()
	want := fmt.Sprintf("startup: %d connection attempts refused after the pod was Ready", after)
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
	if err != nil || len(got) != 1 || !strings.HasPrefix(got[0], "StartupReadyBeforeListening ×1: "+want) {
		t.Errorf("drainwatch's Events on %s: %q (%v), want one StartupReadyBeforeListening ×1 %q…", pod.Name, got, err, want)
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
