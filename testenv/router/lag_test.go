package router

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestRouterLagsBehindEndpointSlice: endpoint 127.0.0.3 turns ready=false
// (terminating) and its server closes its listener at the same moment, as a
// naive pod does at SIGTERM. During the router's 1 s delay new connections
// still go to it and are refused; after the delay none do. The router's
// records and the client's ground truth agree one to one.
func TestRouterLagsBehindEndpointSlice(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lab := lab(t)
	ns := createService(ctx, t, cp.Client)
	backend(t, lab, net.JoinHostPort(ip2, strconv.Itoa(backendPort)))
	gone := net.JoinHostPort(ip3, strconv.Itoa(backendPort))
	removed := backend(t, lab, gone)
	slices := cp.Client.DiscoveryV1().EndpointSlices(ns)
	if _, err := slices.Create(ctx, endpointSlice(true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const delay = time.Second
	r := startRouter(ctx, t, cp.Client, lab, ns, delay)
	if got := r.Backends(); len(got) != 2 {
		t.Fatalf("initial backends %v, want 2", got)
	}

	load := client.Load{Dial: lab.Dial, Target: r.Addr(), Path: "/work", Interval: 10 * time.Millisecond,
		Count: 250, Duration: 2500 * time.Millisecond, Timeout: time.Second}
	done := make(chan []client.Request)
	go func() { reqs, _ := load.Run(ctx); done <- reqs }()
	time.Sleep(500 * time.Millisecond)
	if _, err := slices.Update(ctx, endpointSlice(false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed.Close()
	reqs := <-done

	changes := r.Changes()
	if len(changes) != 2 || changes[1].Applied.IsZero() || changes[1].Applied.Sub(changes[1].Seen) < delay {
		t.Fatalf("changes %+v: want the removal applied %v after it was seen", changes, delay)
	}
	checkLag(t, reqs, r.Conns(), gone, changes[1])
}

// checkLag joins client requests to router connections and checks that the
// removed backend got connections only before the change was applied, and
// that the router refused exactly the connections the client saw reset. A
// reset can reach the client before its connect() returns (loopback is that
// fast): such a request has no local address and is matched by count.
func checkLag(t *testing.T, reqs []client.Request, conns []Conn, gone string, removal Change) {
	t.Helper()
	if len(conns) != len(reqs) || len(reqs) != 250 {
		t.Fatalf("%d requests, %d router connections, want 250 each", len(reqs), len(conns))
	}
	for _, c := range conns {
		if c.Backend == gone && !c.Accepted.Before(removal.Applied) {
			t.Errorf("connection at %v went to %s after the removal was applied at %v", c.Accepted, gone, removal.Applied)
		}
	}
	pair := Join(reqs, conns)
	paired := make([]bool, len(conns))
	unjoined := 0
	for j, q := range reqs {
		if pair[j] < 0 {
			if q.Local != "" || q.Outcome != client.Reset {
				t.Fatalf("request from %q (%s: %s) unknown to the router", q.Local, q.Outcome, q.Err)
			}
			unjoined++
			continue
		}
		c := conns[pair[j]]
		paired[pair[j]] = true
		if want := clientSaw(c); q.Outcome != want {
			t.Errorf("router %s %q (backend reset %v, silent %v) but client %s for %s, want %s", c.Outcome, c.Err, c.BackendReset, c.BackendSilent, q.Outcome, q.Local, want)
		}
	}
	unmatched := 0
	for i, c := range conns {
		if paired[i] {
			continue
		}
		unmatched++
		if clientSaw(c) != client.Reset {
			t.Errorf("router %s for %s, which no client request matches", c.Outcome, c.Client)
		}
	}
	if unmatched != unjoined {
		t.Errorf("%d router connections unmatched, %d client resets before connect returned", unmatched, unjoined)
	}
	reportLag(t, reqs, conns, gone, removal)
}

// clientSaw is what the client of a router connection sees: a reset when
// the backend refused, when the dial failed otherwise (the router resets
// the client on every dial failure: a handshake the removed backend's
// closing listener resets before the router's connect returns fails with
// ECONNRESET, seen once on a loaded machine), or when it reset a proxied
// connection (the removed backend's listener closes with connections still
// in its accept queue: under load some are there); EOF when the backend
// closed a proxied one without a byte; else the response.
func clientSaw(c Conn) client.Outcome {
	switch {
	case c.Outcome == Refused || c.Outcome == DialError || (c.Outcome == Proxied && c.BackendReset):
		return client.Reset
	case c.Outcome == Proxied && c.BackendSilent:
		return client.EOF
	}
	return client.OK
}

// reportLag logs and checks the totals: only ok and reset outcomes, the
// router's refusals equal to the client's resets, and connections to the
// removed backend between the change being seen and applied.
func reportLag(t *testing.T, reqs []client.Request, conns []Conn, gone string, removal Change) {
	t.Helper()
	sum := client.Summarize(reqs)
	refused, dialErrors, backendReset, silent, during := 0, 0, 0, 0, 0
	for _, c := range conns {
		refused += b2i(c.Outcome == Refused)
		dialErrors += b2i(c.Outcome == DialError)
		backendReset += b2i(c.Outcome == Proxied && c.BackendReset)
		silent += b2i(c.Outcome == Proxied && c.BackendSilent)
		during += b2i(c.Backend == gone && c.Accepted.After(removal.Seen))
	}
	t.Logf("removal seen→applied %v; to the removed backend meanwhile: %d; client %v; router refused=%d, dial errors=%d, proxied then reset=%d, proxied then closed=%d",
		removal.Applied.Sub(removal.Seen), during, sum, refused, dialErrors, backendReset, silent)
	if sum[client.OK]+sum[client.Reset]+sum[client.EOF] != len(reqs) || sum[client.Reset] != refused+dialErrors+backendReset ||
		sum[client.EOF] != silent || during == 0 {
		t.Errorf("client %v, router refused=%d dial errors=%d proxied then reset=%d proxied then closed=%d, to the removed backend during the delay %d",
			sum, refused, dialErrors, backendReset, silent, during)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
