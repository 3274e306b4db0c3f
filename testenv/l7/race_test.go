package l7_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/l7"
)

// The pods' server closes a kept-alive connection idle for serverIdle; the
// client alternates a short gap (the pooled connection is reused while the
// server keeps it) and a long one (the server has closed it by then).
const (
	serverIdle = time.Second
	shortGap   = 200 * time.Millisecond
	longGap    = 1500 * time.Millisecond
	raceRounds = 5
	raceSent   = 1 + 2*raceRounds
	proxyIdle  = 30 * time.Second
)

// raceCase is one client and proxy setup and what the client and the
// proxy's log must show.
type raceCase struct {
	name      string
	kind      l7.Kind
	retry     l7.Retry
	idle      time.Duration // the proxy's pool idle timeout
	keepAlive bool          // the client's own connection to the proxy
	method    string
	// The client's 502s and transport errors; the log's requests, 502s
	// and upstream aborts.
	client502, clientErrs               int
	logged, logged502, aborted, retried int
}

// raceCases: every long gap meets a pooled connection the pod has closed,
// 5 in all.
var raceCases = []raceCase{
	// nginx answers each one 502 and logs it (error log: reset by peer).
	{name: "nginx", kind: l7.Nginx, retry: l7.RetryNone, idle: proxyIdle, keepAlive: true, method: http.MethodGet,
		client502: raceRounds, logged: raceSent, logged502: raceRounds, aborted: raceRounds},
	// nginx's default proxy_next_upstream retries the GET on a new
	// connection: the client sees 200s, the log still has the 5 failed
	// attempts ($upstream_status "502, 200").
	{name: "nginx-default-retry", kind: l7.Nginx, retry: l7.RetryDefault, idle: proxyIdle, keepAlive: true, method: http.MethodGet,
		logged: raceSent, logged502: raceRounds, aborted: raceRounds, retried: raceRounds},
	// haproxy answers 502 (SH) when the request is the first on the
	// client's connection, with or without its default retries.
	{name: "haproxy-new-client-conns", kind: l7.HAProxy, retry: l7.RetryNone, idle: proxyIdle, method: http.MethodGet,
		client502: raceRounds, logged: raceSent, logged502: raceRounds, aborted: raceRounds},
	{name: "haproxy-default-retry", kind: l7.HAProxy, retry: l7.RetryDefault, idle: proxyIdle, method: http.MethodGet,
		client502: raceRounds, logged: raceSent, logged502: raceRounds, aborted: raceRounds},
	// On a kept-alive client connection haproxy closes the client's
	// connection without an answer and logs nothing (so that the client
	// retries): a POST, which the client does not retry, fails with a
	// transport error, and the log has only the 6 that succeeded.
	{name: "haproxy-kept-alive-client", kind: l7.HAProxy, retry: l7.RetryNone, idle: proxyIdle, keepAlive: true, method: http.MethodPost,
		clientErrs: raceRounds, logged: raceSent - raceRounds},
	// The fix: the proxy's pool closes idle connections (500 ms) before the
	// pod's server does (1 s). Nothing fails.
	{name: "nginx-fix", kind: l7.Nginx, retry: l7.RetryNone, idle: 500 * time.Millisecond, keepAlive: true, method: http.MethodGet,
		logged: raceSent},
	// haproxy's fix is an L7 retry of the request the server closed
	// without answering: 11 × 200, 5 retried, no 502 and no abort logged
	// (its pool has no per-connection idle timeout to shorten: purging
	// half-closes it at random, 2 of 5 here once).
	{name: "haproxy-retry-empty-response", kind: l7.HAProxy, retry: l7.RetryEmptyResponse, idle: proxyIdle, method: http.MethodGet,
		logged: raceSent, retried: raceRounds},
}

// TestKeepAliveRace: one pod whose server closes idle connections after
// 1 s, behind a proxy pooling them, with the pod's FINs held back
// (DropPodFINs) so the proxy cannot see the close before it reuses the
// connection. The client sends a request, then one 200 ms later (reused,
// alive: 200), then one 1.5 s later (reused, closed by the pod: the pod's
// kernel resets it), for 5 rounds. What the client saw and what the
// proxy logged are compared with the exact counts of raceCases.
func TestKeepAliveRace(t *testing.T) {
	c := oneNode(t, "l7r-")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := uniqueNS("l7race")
	deploy(ctx, t, c, ns, 1, "--idle-timeout="+serverIdle.String())
	undo, err := l7.DropPodFINs(c.Fabric, cluster.ServerPort)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = undo() }()
	for _, rc := range raceCases {
		t.Run(rc.name, func(t *testing.T) { rc.run(ctx, t, c, ns) })
	}
}

func (rc raceCase) run(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) {
	p := startProxy(ctx, t, c, l7.Config{Kind: rc.kind, Namespace: ns, IdleTimeout: rc.idle, Retry: rc.retry})
	waitBackends(t, p, 1)
	hc, url := client(c, rc.keepAlive), "http://"+p.Addr()+"/work"
	var o observed
	o.do(hc, rc.method, url)
	for range raceRounds {
		time.Sleep(shortGap)
		o.do(hc, rc.method, url)
		time.Sleep(longGap)
		o.do(hc, rc.method, url)
	}
	got := closedCounts(t, p)
	t.Logf("client %v, %d errors; log %+v", o.status, len(o.errs), got)
	ok := raceSent - rc.client502 - rc.clientErrs
	if o.status[502] != rc.client502 || o.status[200] != ok || len(o.errs) != rc.clientErrs {
		t.Errorf("client saw %v, errors %v; want %d × 502, %d × 200, %d errors", o.status, o.errs, rc.client502, ok, rc.clientErrs)
	}
	if got.Requests != rc.logged || got.BadGateway() != rc.logged502 || got.Aborted() != rc.aborted || got.Retried != rc.retried {
		t.Errorf("log: %+v; want %d requests, %d upstream 502s, %d upstream aborts, %d retried",
			got, rc.logged, rc.logged502, rc.aborted, rc.retried)
	}
}
