package lab

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

const (
	rolloutNS       = "lab-rollout"
	rolloutReplicas = 4
	routerDelay     = time.Second
	// between is the steady load before, between and after the rollouts.
	between = 2 * time.Second
)

// rolloutRun is what the rolling update leaves for counting.
type rolloutRun struct {
	pods   *podLog
	hashes []string // pod-template-hash of the replaced revisions, in order
	conns  []router.Conn
	reqs   []client.Request
}

// rolloutScenario: a 4-replica naive Deployment behind a router that
// follows EndpointSlices 1 s late, under constant load. Revision 1 → 2
// adds preStop sleep 2 s to the template (the revision-1 pods replaced have
// none); revision 2 → 3 restarts it (the revision-2 pods have the sleep).
// Reported per revision of the replaced pods, from Prometheus.
func rolloutScenario(ctx context.Context, l *Lab) ([]Result, error) {
	run, err := l.rollout(ctx)
	if err != nil {
		return nil, err
	}
	return l.countRollout(ctx, run)
}

func (l *Lab) rollout(ctx context.Context) (*rolloutRun, error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := l.Cluster.Apply(ctx, cluster.Namespace(rolloutNS)); err != nil {
		return nil, err
	}
	pods, err := watchPods(wctx, l.Cluster.Client, rolloutNS)
	if err != nil {
		return nil, err
	}
	dep := cluster.ServerDeployment(rolloutNS, "web", workload.ModeNaive, rolloutReplicas)
	if _, err := l.deploy(ctx, dep); err != nil {
		return nil, errorf("deploying", err)
	}
	r, err := l.Cluster.StartRouter(wctx, cluster.RouterConfig{Namespace: rolloutNS, Service: "web", Delay: routerDelay})
	if err != nil {
		return nil, err
	}
	if err := waitBackends(ctx, r, rolloutReplicas); err != nil {
		return nil, err
	}
	l.progress.Step("rollout: router at %s (delay %v) → %v; constant load: /work every %v, %s every %v",
		r.Addr(), routerDelay, r.Backends(), loadInterval, slowPath, slowInterval)
	load := startLoad(ctx, l.Cluster.Dial, r.Addr())
	run := &rolloutRun{pods: pods}
	time.Sleep(between)
	err = l.rolloutSteps(ctx, dep, run)
	run.reqs = load.Stop()
	run.conns = r.Conns()
	return run, err
}

// rolloutSteps rolls revision 1 → 2 (adds the preStop sleep) and 2 → 3
// (restart), each until the replaced pods are gone, then keeps the load on
// for a moment.
func (l *Lab) rolloutSteps(ctx context.Context, dep *appsv1.Deployment, run *rolloutRun) error {
	steps := []struct {
		what   string
		change func(*appsv1.Deployment)
	}{
		{"revision 1 → 2: the template gains preStop sleep 2 s (the revision-1 pods it replaces have none)", addPreStopSleep},
		{"revision 2 → 3: rollout restart (the revision-2 pods it replaces sleep 2 s in preStop)", restartTemplate},
	}
	for _, s := range steps {
		hash, err := l.currentHash(ctx)
		if err != nil {
			return err
		}
		l.progress.Step("rollout: %s", s.what)
		s.change(dep)
		if err := l.Cluster.Apply(ctx, dep.DeepCopy()); err != nil {
			return err
		}
		if _, err := l.waitRolledOut(ctx, rolloutNS, dep.Name); err != nil {
			return err
		}
		for _, p := range run.pods.withHash(hash) {
			if err := l.Cluster.WaitPodGone(ctx, rolloutNS, p.Name); err != nil {
				return err
			}
		}
		run.hashes = append(run.hashes, hash)
		l.progress.Step("rollout: rolled out, the %d replaced pods are gone", len(run.pods.withHash(hash)))
		time.Sleep(between)
	}
	return nil
}

func addPreStopSleep(d *appsv1.Deployment) {
	d.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
		PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}}
}

// restartTemplate is what `kubectl rollout restart` does.
func restartTemplate(d *appsv1.Deployment) {
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
}

// currentHash is the pod-template-hash of the Deployment's ready pods.
func (l *Lab) currentHash(ctx context.Context) (string, error) {
	pods, err := l.Cluster.ReadyPods(ctx, rolloutNS, "app=web")
	if err != nil {
		return "", err
	}
	if len(pods) == 0 {
		return "", fmt.Errorf("no ready pod in %s", rolloutNS)
	}
	return pods[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey], nil
}

func waitBackends(ctx context.Context, r *router.Router, n int) error {
	for len(r.Backends()) != n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("router backends %v, want %d: %w", r.Backends(), n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
