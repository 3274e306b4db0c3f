package router

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// countingBackend is backend() that counts the connections it accepted.
func countingBackend(t *testing.T, lab *netlab.NS, addr string, conns *atomic.Int32) *http.Server {
	t.Helper()
	ln, err := lab.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestKeepAlivePooling: 20 requests, each on its own client connection,
// alternate between 2 backends over exactly one pooled connection each.
// Then one backend goes away (slice ready=false, server closed): for the 1 s
// delay requests still picked for it fail with 502 (the pooled connection is gone, the redial is refused), none
// after; the router's records match the client's statuses.
func TestKeepAlivePooling(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lab := lab(t)
	ns := createService(ctx, t, cp.Client)
	var conns2, conns3 atomic.Int32
	countingBackend(t, lab, net.JoinHostPort(ip2, strconv.Itoa(backendPort)), &conns2)
	gone := net.JoinHostPort(ip3, strconv.Itoa(backendPort))
	removed := countingBackend(t, lab, gone, &conns3)
	slices := cp.Client.DiscoveryV1().EndpointSlices(ns)
	if _, err := slices.Create(ctx, endpointSlice(true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ln, err := lab.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Start(ctx, Config{Client: cp.Client, Namespace: ns, Service: "echo", Delay: time.Second,
		Listener: ln, Dial: lab.Dial, KeepAlive: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if q := client.Get(ctx, lab.Dial, r.Addr(), "/work", time.Second, nil); q.Outcome != client.OK {
			t.Fatalf("request %d: %s (%s)", i, q.Outcome, q.Err)
		}
	}
	reused := 0
	for _, c := range r.Conns() {
		reused += b2i(c.Reused)
	}
	if conns2.Load() != 1 || conns3.Load() != 1 || reused != 18 {
		t.Fatalf("backend connections %d and %d, %d of 20 requests reused one; want 1, 1, 18", conns2.Load(), conns3.Load(), reused)
	}
	checkPooledRemoval(ctx, t, r, lab.Dial, removed, gone, func() {
		if _, err := slices.Update(ctx, endpointSlice(false), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func checkPooledRemoval(ctx context.Context, t *testing.T, r *Router, dial client.DialFunc, removed *http.Server, gone string, remove func()) {
	t.Helper()
	before := len(r.Conns())
	load := client.Load{Dial: dial, Target: r.Addr(), Path: "/work", Interval: 10 * time.Millisecond,
		Count: 200, Duration: 2 * time.Second, Timeout: time.Second}
	done := make(chan []client.Request)
	go func() { reqs, _ := load.Run(ctx); done <- reqs }()
	time.Sleep(300 * time.Millisecond)
	remove()
	removed.Close()
	reqs := <-done
	changes := r.Changes()
	if len(changes) != 2 || changes[1].Applied.IsZero() {
		t.Fatalf("changes %+v", changes)
	}
	conns := r.Conns()[before:]
	failed, after := 0, 0
	for _, c := range conns {
		if c.Backend == gone && !c.Accepted.Before(changes[1].Applied) {
			after++
		}
		if c.Outcome != Proxied {
			failed++
			if c.Backend != gone || c.Status != http.StatusBadGateway || c.Outcome != Refused {
				t.Errorf("failure %+v not a 502 for the removed backend", c)
			}
		}
	}
	sum := client.Summarize(reqs)
	t.Logf("pooled: client %v; router failures %d (to the removed backend), after the delay %d", sum, failed, after)
	if len(conns) != 200 || sum[client.OK]+sum[client.HTTPStatus(502)] != 200 || sum[client.HTTPStatus(502)] != failed || after != 0 || failed == 0 {
		t.Errorf("%d records, client %v, router failures %d, to the removed backend after the delay %d", len(conns), sum, failed, after)
	}
}
