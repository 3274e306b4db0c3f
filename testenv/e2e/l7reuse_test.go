package e2e_test

import (
	"context"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/l7"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The keep-alive race behind real proxies during a rollout. The pods'
// server closes kept-alive connections idle for l7ServerIdle (l7FixedIdle
// with the fix: longer than the proxy's pool) and, at its stop signal,
// closes its idle connections and serves l7Drain more with keep-alives off
// (protocol mode). The proxy pools upstream connections;
// the pods' FINs are held back (l7.DropPodFINs, as in testenv/l7's
// TestKeepAliveRace), so the proxy learns of no close and every reuse of a
// connection the pod closed meets a RST. The client alternates a short gap
// (the pooled connection is alive) and a long one (the pod has closed it).
const (
	l7ServerIdle = time.Second
	l7FixedIdle  = time.Minute
	l7Drain      = 2 * time.Second
	l7ShortGap   = 200 * time.Millisecond
	l7LongGap    = 1500 * time.Millisecond
	l7Rounds     = 8
	l7RolloutAt  = 2 // rounds before `kubectl rollout restart`
	l7ProxyIdle  = 30 * time.Second
)

// l7Case is one proxy setup. The proxies never retry (l7.RetryNone), so
// every upstream failure reaches the client; nginx keeps the client's
// connection alive, haproxy gets a new one per request (on a kept-alive
// client connection haproxy closes it without an answer or a log line:
// see testenv/l7).
type l7Case struct {
	name      string
	kind      l7.Kind
	keepAlive bool // the client's connection to the proxy
	// fixed: the pods' idle timeout is longer than the proxy's pool
	// (drainwatch's fix for resets before the stop signal).
	fixed bool
}

var l7Cases = []l7Case{
	{name: "nginx", kind: l7.Nginx, keepAlive: true},
	{name: "haproxy", kind: l7.HAProxy},
	{name: "nginx-fix", kind: l7.Nginx, keepAlive: true, fixed: true},
	{name: "haproxy-fix", kind: l7.HAProxy, fixed: true},
}

// TestL7RolloutResetsOnReuse: a Deployment of 2 behind haproxy and behind
// nginx, rolled out while the client sends through the proxy. drainwatch's
// requests reset on reused connections (the old pods' terminations plus
// the workload's count outside terminations) equal the upstream aborts the
// proxy logged, and the client's 502s are those aborts plus, for nginx,
// the requests it answered "no live upstreams" (each abort disables its
// server for 10 s: l7.Counts.NoLiveUpstreams). With the fix, all are 0.
func TestL7RolloutResetsOnReuse(t *testing.T) {
	privileged.RequireFile(t, "/usr/sbin/haproxy", "haproxy (make deps)")
	privileged.RequireFile(t, "/usr/sbin/nginx", "nginx (make deps)")
	for _, lc := range l7Cases {
		t.Run(lc.name, func(t *testing.T) { lc.run(t) })
	}
}

func (lc l7Case) run(t *testing.T) {
	c, ds := startCluster(t, "e2l7-", 1)
	d := ds[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-l7")
	idle := l7ServerIdle
	if lc.fixed {
		idle = l7FixedIdle
	}
	dep := cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 2, "--idle-timeout="+idle.String(), "--drain-delay="+l7Drain.String())
	dep.Spec.Strategy = oneAtATime()
	old := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, old)
	undo, err := l7.DropPodFINs(c.Fabric, cluster.ServerPort)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = undo() }()
	dir := t.TempDir()
	p, err := l7.Start(ctx, l7.Config{Kind: lc.kind, Client: c.Client, Namespace: ns, Service: "web", NetNS: c.Fabric,
		Dir: dir, IdleTimeout: l7ProxyIdle, Retry: l7.RetryNone})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer func() {
		if t.Failed() {
			for _, name := range []string{"haproxy.out", "access.log", "error.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
					t.Logf("%s:\n%s", name, b)
				}
			}
		}
	}()
	for len(p.Backends()) != 2 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	status, errs := lc.drive(ctx, t, c, p.Addr(), ns)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	logged, err := p.Counts()
	if err != nil {
		t.Fatal(err)
	}
	inTerms, after := 0, 0
	var terms []correlate.Termination
	for i := range old {
		got := waitComplete(ctx, t, d, string(old[i].UID))
		terms = append(terms, got)
		inTerms += got.Counts.RequestsResetOnReusedConnections
		after += got.ReuseResets.AfterStopSignal
		t.Logf("%s: reset on reuse %d (%d after the stop signal; %v), reset at shutdown %d, refused %d; routing sources %+v; diagnoses %v",
			old[i].Name, got.Counts.RequestsResetOnReusedConnections, got.ReuseResets.AfterStopSignal, got.ReuseResets.Reasons,
			got.Counts.ConnectionsResetAtShutdown, got.Counts.RefusedAfterSigterm, got.RoutingSources, codes(got))
	}
	steady := waitSteadyReuse(ctx, d, ns, logged.Aborted()-inTerms)
	total := inTerms + steady
	got502 := status[http.StatusBadGateway]
	t.Logf("%s: client %v, %d errors; proxy log %d requests, %d × 502 to the client, %d upstream aborts, %d no live upstreams; drainwatch %d reset on reuse (%d in terminations, %d after a stop signal, %d outside)",
		lc.name, status, len(errs), logged.Requests, logged.Status[http.StatusBadGateway], logged.Aborted(), logged.NoLiveUpstreams, total, inTerms, after, steady)
	if len(errs) != 0 {
		t.Errorf("client transport errors: %v", errs)
	}
	if total != logged.Aborted() || got502 != logged.Aborted()+logged.NoLiveUpstreams || logged.Status[http.StatusBadGateway] != got502 {
		t.Errorf("drainwatch %d resets on reuse, the proxy logged %d upstream aborts (+%d no live upstreams) and %d × 502, the client got %d × 502",
			total, logged.Aborted(), logged.NoLiveUpstreams, logged.Status[http.StatusBadGateway], got502)
	}
	if lc.fixed != (total == 0) {
		t.Errorf("fixed %v with %d resets on reuse: the race must show without the fix and vanish with it", lc.fixed, total)
	}
	lc.checkKeepAlive(t, terms, inTerms-after)
}

// checkKeepAlive checks the idle timeouts drainwatch measured on the old
// pods against the configured ones, and the timeout advise derives. The
// server closed its idle connections after l7ServerIdle (to a jiffy and
// its timer); the proxy reused them after at least the client's long gap
// and at most its own pool's idle timeout (l7ProxyIdle; how long in
// between depends on its balancing and on nginx disabling a failed server
// for 10 s). Each reset before a stop signal follows a close drainwatch
// saw, so the reuses matched to a close are at least those (the rest are
// outside the terminations, also the new pods'). The advice is above the
// longest reuse; with the fix, there is none.
func (lc l7Case) checkKeepAlive(t *testing.T, terms []correlate.Termination, beforeStop int) {
	t.Helper()
	a := advise.Advise(terms, advise.Rule{Percentile: 99, MinTerminations: len(terms), Margin: time.Second})[0]
	k := a.KeepAlive
	t.Logf("%s: keep-alive %+v; advised server idle timeout %d s: %q", lc.name, k, a.ServerIdleTimeoutSeconds, a.Why)
	if lc.fixed {
		if k.PoolReuses != 0 || a.ServerIdleTimeoutSeconds != 0 {
			t.Errorf("with the fix: %d pool reuses, advised idle timeout %d s; want none", k.PoolReuses, a.ServerIdleTimeoutSeconds)
		}
		return
	}
	const jiffy, timer = 10 * time.Millisecond, 250 * time.Millisecond // HZ ≥ 100; the server's timer and a loaded machine
	if time.Duration(k.IdleMin) < l7ServerIdle-jiffy || time.Duration(k.IdleMax) > l7ServerIdle+timer {
		t.Errorf("the server's idle closes measured %v to %v, want within [%v, %v]", k.IdleMin, k.IdleMax, l7ServerIdle-jiffy, l7ServerIdle+timer)
	}
	if k.PoolReuses < beforeStop || time.Duration(k.PoolIdleMax) < l7LongGap-jiffy || time.Duration(k.PoolIdleMax) > l7ProxyIdle {
		t.Errorf("%d pool reuses (want ≥ %d, the resets before a stop signal), the longest after %v idle (want within [%v, %v])",
			k.PoolReuses, beforeStop, k.PoolIdleMax, l7LongGap-jiffy, l7ProxyIdle)
	}
	if want := int64(math.Ceil((time.Duration(k.PoolIdleMax) + time.Second).Seconds())); a.ServerIdleTimeoutSeconds != want {
		t.Errorf("advised server idle timeout %d s, want ⌈%v + 1s⌉ = %d", a.ServerIdleTimeoutSeconds, k.PoolIdleMax, want)
	}
}

// drive runs l7.Alternate through the proxy, restarting the Deployment
// after l7RolloutAt rounds, and waits for the rollout; it returns the
// statuses and transport errors seen.
func (lc l7Case) drive(ctx context.Context, t *testing.T, c *cluster.Cluster, proxy, ns string) (map[int]int, []error) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: c.Fabric.DialContext, DisableKeepAlives: !lc.keepAlive}}
	o, err := l7.Alternate{Client: hc, URL: "http://" + proxy + "/work", Rounds: l7Rounds, Short: l7ShortGap, Long: l7LongGap, At: l7RolloutAt,
		Between: func(ctx context.Context) error {
			_, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web")
			return err
		}}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	return o.Status, o.Errs
}

// waitSteadyReuse reads the workload's resets on reuse outside
// terminations once they reach want (the daemon's tick publishes them), or
// after 10 s.
func waitSteadyReuse(ctx context.Context, d *nodeDaemon, ns string, want int) int {
	n := 0
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n = steadyReuse(d, ns, "web")
		return n >= want, nil
	})
	return n
}
