package l7_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/l7"
)

// TestFollowsScaleDown: the proxy starts with the Service's two ready
// endpoints and round-robins 20 requests over them (10 each); the
// Deployment is scaled to 1, the proxy drops the removed endpoint, and the
// next 20 requests all go to the remaining one. Every request is a 200, by
// the client's count and by the proxy's log.
func TestFollowsScaleDown(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) { followsScaleDown(t, kind) })
	}
}

func followsScaleDown(t *testing.T, kind l7.Kind) {
	c := oneNode(t, "l7f-"+string(kind)+"-")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := uniqueNS("l7follow")
	deploy(ctx, t, c, ns, 2)
	p := startProxy(ctx, t, c, l7.Config{Kind: kind, Namespace: ns, Retry: l7.RetryNone})
	both := waitBackends(t, p, 2)
	hc, url := client(c, true), "http://"+p.Addr()+"/work"
	var o observed
	for range 20 {
		o.do(hc, http.MethodGet, url)
	}
	if err := c.Apply(ctx, cluster.ServerDeployment(ns, "web", "naive", 1)); err != nil {
		t.Fatal(err)
	}
	kept := waitBackends(t, p, 1)[0]
	last := p.Updates()[len(p.Updates())-1]
	t.Logf("%s applied %v %v after the informer delivered it", kind, last.Backends, last.Applied.Sub(last.Seen))
	for range 20 {
		o.do(hc, http.MethodGet, url)
	}
	if o.status[200] != 40 || len(o.errs) != 0 {
		t.Fatalf("client saw %v, errors %v; want 40 × 200", o.status, o.errs)
	}
	got := closedCounts(t, p)
	removed := other(both, kept)
	if got.Requests != 40 || got.Status[200] != 40 || got.Backends[kept].Attempts != 30 || got.Backends[removed].Attempts != 10 {
		t.Fatalf("%s log: %+v; want 40 × 200, 30 to %s (kept), 10 to %s (removed)", kind, got, kept, removed)
	}
}
