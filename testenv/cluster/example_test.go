package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// Example_rollout shows the shape of a test on testenv: a cluster, a
// Deployment behind a lagging router, load through it, and the ground truth.
func Example_rollout() {
	var t *testing.T // the test's
	ctx := context.Background()
	c := cluster.StartT(t, cluster.Options{Nodes: 2}) // stops when the test ends
	ns := "demo"
	_ = c.Apply(ctx, cluster.Namespace(ns), cluster.ServerDeployment(ns, "web", workload.ModeNaive, 3),
		cluster.ServiceFor(ns, "web"))
	_, _ = c.WaitRolledOut(ctx, ns, "web")
	r, _ := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: time.Second})
	load := client.Load{Dial: c.Dial, Target: r.Addr(), Path: "/work",
		Interval: 20 * time.Millisecond, Count: 500, Duration: 10 * time.Second}
	go func() { _, _ = c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web") }()
	reqs, _ := load.Run(ctx)
	fmt.Println(client.Summarize(reqs)) // e.g. ok=470 reset=30: the router's refusals
	for _, cn := range r.Conns() {
		if cn.Outcome == router.Refused {
			fmt.Println(cn.Backend) // the pod that refused, per connection
		}
	}
}
