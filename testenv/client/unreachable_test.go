package client

import (
	"context"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestUnreachable dials a pod address from a namespace that has no route to
// it: the connect fails with ENETUNREACH, nothing leaves the namespace.
func TestUnreachable(t *testing.T) {
	privileged.RequireRoot(t)
	ns, err := netlab.New("client-unreach")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	r := Get(context.Background(), ns.Dial, netlab.PodIP(1, 2)+":8080", "/work", time.Second, nil)
	if r.Outcome != Unreachable {
		t.Fatalf("outcome %q (%s), want %q", r.Outcome, r.Err, Unreachable)
	}
}
