package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

const (
	rolloutNS       = "lab-rollout"
	rolloutReplicas = 4
	// routerDelay is half-way between whole seconds: advise rounds the
	// routing lag (about this) plus its margin up to whole seconds, and a
	// lag this far from a boundary lands the same from rollout to rollout.
	routerDelay = 1500 * time.Millisecond
	// between is the steady load before, between and after the rollouts.
	between = 2 * time.Second
)

// rolloutRun is what the rolling update leaves for counting.
type rolloutRun struct {
	pods   *podLog
	hashes []string // pod-template-hash of the replaced revisions, in order
	conns  []router.Conn
	reqs   []client.Request
	// advice is the patch `drainwatch advise -o patch` printed after the
	// first rollout and kubectl applied; adviceAfter what it printed from
	// the terminations of the pods with that advice (those after
	// advisedFrom), once they had been replaced too.
	advice, adviceAfter string
	advisedFrom         time.Time
}

// rolloutScenario: a 4-replica naive Deployment behind a router that
// follows EndpointSlices 1.5 s late, under constant load, and the closed
// loop of `drainwatch advise` (issue 25): revision 1 → 2 is a rollout
// restart (the revision-1 pods replaced have no preStop); revision 2 → 3
// is the patch `drainwatch advise -o patch` prints from revision 1's
// terminations, applied with the real kubectl (the revision-2 pods
// replaced have no preStop either); revision 3 → 4 restarts it (the
// revision-3 pods sleep what advise said), and advise, asked about their
// terminations, then has nothing to change. Reported per revision of the
// replaced pods, from Prometheus.
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

// rolloutSteps rolls revision 1 → 2 (restart), 2 → 3 (advise's patch) and
// 3 → 4 (restart), each until the replaced pods are gone, keeping the load
// on for a moment after each; then asks advise again.
func (l *Lab) rolloutSteps(ctx context.Context, dep *appsv1.Deployment, run *rolloutRun) error {
	steps := []struct {
		what   string
		change func(context.Context) error
	}{
		{"revision 1 → 2: kubectl rollout restart (the revision-1 pods it replaces have no preStop)", l.rolloutRestart},
		{"revision 2 → 3: drainwatch advise -o patch from revision 1's terminations, applied with kubectl patch (the revision-2 pods it replaces have no preStop)",
			func(ctx context.Context) error { return l.applyAdvice(ctx, run) }},
		{"revision 3 → 4: kubectl rollout restart (the revision-3 pods it replaces sleep what advise said)", func(ctx context.Context) error {
			// advisedFrom is after every mark of the terminations before.
			if err := l.waitReplaced(ctx, run, run.hashes[len(run.hashes)-1]); err != nil {
				return err
			}
			run.advisedFrom = time.Now()
			return l.rolloutRestart(ctx)
		}},
	}
	for _, s := range steps {
		hash, err := l.currentHash(ctx)
		if err != nil {
			return err
		}
		l.progress.Step("rollout: %s", s.what)
		if err := s.change(ctx); err != nil {
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
	if err := l.waitReplaced(ctx, run, run.hashes[len(run.hashes)-1]); err != nil {
		return err
	}
	since := "--since=" + run.advisedFrom.UTC().Format(time.RFC3339Nano)
	after, err := l.advise(ctx, "-o", "patch", since)
	run.adviceAfter = strings.TrimSpace(after)
	l.progress.Step("rollout: drainwatch advise -o patch %s (the advised pods' terminations): %s", since, run.adviceAfter)
	return err
}

func (l *Lab) rolloutRestart(ctx context.Context) error {
	_, err := l.Cluster.Kubectl(ctx, "-n", rolloutNS, "rollout", "restart", "deployment/web")
	return err
}

// applyAdvice waits for the terminations of the revision replaced last to
// be complete, then applies what `drainwatch advise -o patch` prints for
// the Deployment with kubectl patch, as a user would.
func (l *Lab) applyAdvice(ctx context.Context, run *rolloutRun) error {
	if err := l.waitReplaced(ctx, run, run.hashes[len(run.hashes)-1]); err != nil {
		return err
	}
	text, err := l.advise(ctx)
	if err != nil {
		return err
	}
	l.progress.Block(text)
	patch, err := l.advise(ctx, "-o", "patch")
	if err != nil {
		return err
	}
	run.advice = strings.TrimSpace(patch)
	if run.advice == "" || run.advice == "{}" {
		return fmt.Errorf("drainwatch advise -o patch advised no change after a rollout that lost traffic: %q", run.advice)
	}
	out, err := l.Cluster.Kubectl(ctx, "patch", "-n", rolloutNS, "deployment/web", "-p", run.advice)
	l.progress.Step("rollout: kubectl patch -n %s deployment/web -p '%s': %s", rolloutNS, run.advice, strings.TrimSpace(string(out)))
	return err
}

// waitReplaced waits for the terminations of the pods of hash to be
// complete.
func (l *Lab) waitReplaced(ctx context.Context, run *rolloutRun, hash string) error {
	var uids []string
	for _, p := range run.pods.withHash(hash) {
		uids = append(uids, p.UID)
	}
	_, err := l.WaitComplete(ctx, rolloutNS, uids...)
	return err
}

// advise runs `drainwatch advise -n lab-rollout deploy/web` against the
// daemons, as a user does.
func (l *Lab) advise(ctx context.Context, args ...string) (string, error) {
	args = append([]string{"advise", "-n", rolloutNS, "deploy/web", "--kubeconfig=" + l.Cluster.Kubeconfig}, args...)
	out, err := exec.CommandContext(ctx, l.cfg.Drainwatch, append(args, l.daemonArgs()...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("drainwatch %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
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
