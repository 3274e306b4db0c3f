package lab

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/testenv/cluster"
)

// settle is how long the lab waits after pods are Ready before it stops
// one: the daemon binds a new pod's network namespace on its next tick
// (250 ms). The binary does not expose that binding (the in-process e2e
// tests ask daemon.Watching); four ticks are the margin.
const settle = time.Second

// deploy applies ns, the Deployment (probes dropped) and its Service, waits
// until it is rolled out and the daemons had time to watch its pods, and
// returns the ready pods.
func (l *Lab) deploy(ctx context.Context, dep *appsv1.Deployment) ([]corev1.Pod, error) {
	ns := dep.Namespace
	if err := l.Cluster.Apply(ctx, cluster.Namespace(ns), dep, cluster.ServiceFor(ns, dep.Name)); err != nil {
		return nil, err
	}
	if _, err := l.waitRolledOut(ctx, ns, dep.Name); err != nil {
		return nil, err
	}
	pods, err := l.Cluster.ReadyPods(ctx, ns, "app="+dep.Name)
	if err != nil {
		return nil, err
	}
	if len(pods) != int(*dep.Spec.Replicas) {
		err := fmt.Errorf("%d ready pods of %s/%s, want %d", len(pods), ns, dep.Name, *dep.Spec.Replicas)
		return nil, l.whyNotStarted(ctx, ns, dep.Name, err)
	}
	time.Sleep(settle)
	return pods, nil
}
