package soak

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
)

const (
	// routerDelay: the router follows the EndpointSlices this late, so
	// the naive pods refuse what it still sends them after their stop.
	routerDelay = time.Second
	// loadEvery is the constant load through the router during a round,
	// bounded by loadFor and the round's end.
	loadEvery = 50 * time.Millisecond
	loadFor   = 5 * time.Minute
	// dialTimeout: the router's backend dials wait this long, so that a
	// refusal is recorded as one even on a loaded machine (see
	// cluster.RouterConfig.DialTimeout).
	dialTimeout = 15 * time.Second
	// rolloutTimeout bounds a rollout of Pods pods on a shared, loaded
	// machine (the API server answers slowly there).
	rolloutTimeout = 10 * time.Minute
)

// Round is one rollout: its replaced pods and how many were exact.
type Round struct {
	Index        int
	Started      time.Time
	Took         time.Duration // rollout and the terminations complete
	Replaced     int
	Exact        int
	Refused      int // the router's refusals by the replaced pods
	ClientOutput string
}

// round restarts the Deployment under load through a fresh router, waits
// for the replaced pods to be gone and their terminations complete, and
// compares each with the ground truth.
func (s *soak) round(ctx context.Context, i int) error {
	rd := Round{Index: i, Started: time.Now()}
	old, err := s.cluster.ReadyPods(ctx, namespace, "app="+app)
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	r, err := s.cluster.StartRouter(rctx, cluster.RouterConfig{Namespace: namespace, Service: app, Delay: routerDelay,
		DialTimeout: dialTimeout})
	if err != nil {
		return err
	}
	if err := waitBackends(ctx, r, len(old)); err != nil {
		return err
	}
	load := client.Load{Dial: s.cluster.Dial, Target: r.Addr(), Path: "/work", Interval: loadEvery,
		Count: int(loadFor / loadEvery), Duration: loadFor}
	reqs := make(chan []client.Request, 1)
	go func() { got, _ := load.Run(rctx); reqs <- got }()
	if err := s.rollout(ctx, old); err != nil {
		return fmt.Errorf("round %d: %w", i, err)
	}
	time.Sleep(routerDelay) // the router forgets the gone pods
	stop()
	rd.ClientOutput = client.Summarize(<-reqs).String()
	return s.check(ctx, &rd, old, r.Conns())
}

// rollout is `kubectl rollout restart` until the replaced pods are gone.
func (s *soak) rollout(ctx context.Context, old []corev1.Pod) error {
	if _, err := s.cluster.Kubectl(ctx, "-n", namespace, "rollout", "restart", "deployment/"+app); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	if _, err := s.cluster.WaitRolledOut(ctx, namespace, app); err != nil {
		return err
	}
	for _, p := range old {
		if err := s.cluster.WaitPodGone(ctx, namespace, p.Name); err != nil {
			return err
		}
	}
	return nil
}

func waitBackends(ctx context.Context, r *router.Router, n int) error {
	for len(r.Backends()) != n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("router backends %d, want %d: %w", len(r.Backends()), n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
