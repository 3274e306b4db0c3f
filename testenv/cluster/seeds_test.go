package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestSeedsThroughLaggingRouter runs the seeds' experiment on a real pod of a
// 2-replica Deployment, deleted through the API, with /work sent through a
// router that learns of the removal 1 s late. naive closes its listener at
// SIGTERM: every connection the router still sends it is refused. protocol
// keeps serving 1.5 s: nothing is refused. In both, the router stops sending
// connections to the pod exactly when the delay has passed.
func TestSeedsThroughLaggingRouter(t *testing.T) {
	c := twoNodes(t, "sd-")
	for _, tc := range []struct {
		mode string
		args []string
	}{
		{workload.ModeNaive, nil},
		{workload.ModeProtocol, []string{"--drain-delay=1500ms"}},
	} {
		t.Run(tc.mode, func(t *testing.T) { seedsThroughRouter(t, c, tc.mode, tc.args) })
	}
}

func seedsThroughRouter(t *testing.T, c *cluster.Cluster, mode string, args []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := uniqueNS("seeds-" + mode)
	err := c.Apply(ctx, cluster.Namespace(ns), cluster.ServerDeployment(ns, "web", mode, 2, args...), cluster.ServiceFor(ns, "web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.ReadyPods(ctx, ns, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	victim := cluster.PodAddr(&pods[0], cluster.ServerPort)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	r, err := c.StartRouter(rctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitBackends(ctx, t, r, 2)
	res, err := c.Seeds(ctx, &pods[0], cluster.ServerPort, r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, through the router (delay 1 s):\n%s", mode, res.Timeline())
	checkRouterLag(t, r, res, victim, mode)
}

func waitBackends(ctx context.Context, t *testing.T, r *router.Router, n int) {
	t.Helper()
	for len(r.Backends()) != n {
		if ctx.Err() != nil {
			t.Fatalf("router backends %v, want %d", r.Backends(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRouterLag: the router sent connections to the victim after it saw the
// removal and none after applying it; what it refused is what the client saw
// reset (with any the pod itself reset); naive loses them, protocol loses none.
func checkRouterLag(t *testing.T, r *router.Router, res client.SeedsResult, victim, mode string) {
	t.Helper()
	var removal router.Change
	for _, ch := range r.Changes() {
		if !ch.Applied.IsZero() && !slices.Contains(ch.Backends, victim) && ch.Seen.After(res.StopAt) {
			removal = ch
			break
		}
	}
	if removal.Applied.IsZero() {
		t.Fatalf("router never applied the removal of %s: %+v", victim, r.Changes())
	}
	during, after, refused, backendReset, silent, failed := 0, 0, 0, 0, 0, 0
	for _, cn := range r.Conns() {
		if cn.Backend == victim && !cn.Accepted.Before(removal.Applied) {
			after++
		} else if cn.Backend == victim && cn.Accepted.After(removal.Seen) {
			during++
		}
		if cn.Outcome == router.Refused {
			refused++
		}
		if cn.BackendReset {
			backendReset++ // e.g. still in the accept queue when naive closed its listener
		}
		if cn.BackendSilent {
			silent++ // read but not answered by a server shutting down: the client sees EOF
		}
		if cn.Outcome == router.DialError || cn.Outcome == router.NoBackend {
			failed++ // the router resets the client too (a dial past its 1 s timeout under load)
		}
	}
	sum := client.Summarize(res.Work)
	t.Logf("%s: removal seen %v after the delete, applied %v later; to the pod meanwhile %d, after %d; router refused %d, reset by the pod %d, closed unanswered by the pod %d, dial failed %d; client %v; in-flight /slow %s",
		mode, removal.Seen.Sub(res.StopAt).Round(time.Millisecond), removal.Applied.Sub(removal.Seen).Round(time.Millisecond),
		during, after, refused, backendReset, silent, failed, sum, res.Slow.Outcome)
	want := nonZero(client.Summary{client.OK: len(res.Work) - failed, client.Reset: failed}).String()
	if mode == workload.ModeNaive {
		want = nonZero(client.Summary{client.OK: len(res.Work) - refused - backendReset - silent - failed,
			client.Reset: refused + backendReset + failed, client.EOF: silent}).String()
	}
	if after != 0 || during == 0 || sum.String() != want || len(res.Work) != 50 || res.Slow.Outcome != client.OK {
		t.Errorf("%s: after=%d during=%d client %v (want %s of 50), /slow %s", mode, after, during, sum, want, res.Slow.Outcome)
	}
	if mode == workload.ModeProtocol && refused != 0 {
		t.Errorf("protocol: router refused %d connections, want 0", refused)
	}
}

// nonZero drops the outcomes nothing had, as Summarize does.
func nonZero(s client.Summary) client.Summary {
	for k, n := range s {
		if n == 0 {
			delete(s, k)
		}
	}
	return s
}
