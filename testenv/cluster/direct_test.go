package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// listenerCloseMargin bounds how far from SIGTERM a naive request may go
// either way: after it, signal delivery plus http.Server.Shutdown closing
// its listener (still accepted: 17 ms once, with a lab running beside
// make test on 2 cores); before it, a connection accepted whose request
// the server had not read yet, which Shutdown closes as idle (EOF).
const listenerCloseMargin = 50 * time.Millisecond

// TestSeedsStraightAtPod is the seeds' experiment with clients only: /work
// straight at a real pod that is deleted through the API. naive: every
// request started before the stop signal reached PID 1 succeeds, every
// request started after it is refused, except within listenerCloseMargin
// of the signal either way. protocol (1.5 s
// drain delay): all 50 succeed and /ready answers 503 from the first poll
// after the signal.
func TestSeedsStraightAtPod(t *testing.T) {
	c := twoNodes(t, "dp-")
	for _, tc := range []struct {
		mode string
		args []string
	}{
		{workload.ModeNaive, nil},
		{workload.ModeProtocol, []string{"--drain-delay=1500ms"}},
	} {
		t.Run(tc.mode, func(t *testing.T) { seedsAtPod(t, c, tc.mode, tc.args) })
	}
}

func seedsAtPod(t *testing.T, c *cluster.Cluster, mode string, args []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := uniqueNS("direct-" + mode)
	if err := c.Apply(ctx, cluster.Namespace(ns), cluster.ServerDeployment(ns, "web", mode, 1, args...)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.ReadyPods(ctx, ns, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	pod := pods[0]
	res, err := c.Seeds(ctx, &pod, cluster.ServerPort, cluster.PodAddr(&pod, cluster.ServerPort))
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.WaitTerminated(ctx, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, straight at the pod; %s reached PID 1 %v after the delete:\n%s", mode, term.StopSignal,
		term.StopSignalAt.Sub(res.StopAt).Round(time.Millisecond), res.Timeline())
	if len(res.Work) != 50 || res.Slow.Outcome != client.OK || term.ExitCode != 0 {
		t.Fatalf("%d /work requests, /slow %s, exit code %d; want 50, ok, 0", len(res.Work), res.Slow.Outcome, term.ExitCode)
	}
	for _, q := range res.Work {
		want := client.OK
		if mode == workload.ModeNaive && q.Start.After(term.StopSignalAt) {
			want = client.Refused
		}
		ambiguous := mode == workload.ModeNaive && q.Start.After(term.StopSignalAt.Add(-listenerCloseMargin)) &&
			q.Start.Before(term.StopSignalAt.Add(listenerCloseMargin))
		if q.Outcome != want && !ambiguous {
			t.Errorf("/work #%d started %v after the signal: %s, want %s", q.Seq, q.Start.Sub(term.StopSignalAt), q.Outcome, want)
		}
	}
}
