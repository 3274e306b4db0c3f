package lab

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/l7"
	"github.com/drainwatch/drainwatch/testenv/promtest"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The keep-alive race behind a real L7 proxy during a rollout (as in the
// e2e TestL7RolloutResetsOnReuse): pods whose server closes idle
// connections after 1 s (60 s with the fix: longer than the pool), a proxy
// pooling them for 30 s without retries, the pods' FINs held back
// (l7.DropPodFINs) so the proxy learns of no close.
const (
	l7ServerIdle = time.Second
	l7FixedIdle  = time.Minute
	l7ProxyIdle  = 30 * time.Second
	l7Rounds     = 8
)

type l7Case struct {
	name, ns  string
	kind      l7.Kind
	keepAlive bool // the client's connection to the proxy (haproxy: new ones, see testenv/l7)
	fixed     bool
}

var (
	l7Nginx      = l7Case{"l7/nginx", "lab-l7-nginx", l7.Nginx, true, false}
	l7HAProxy    = l7Case{"l7/haproxy", "lab-l7-haproxy", l7.HAProxy, false, false}
	l7NginxFixed = l7Case{"l7/nginx-fix", "lab-l7-nginx-fix", l7.Nginx, true, true}
)

func l7Scenario(c l7Case) func(context.Context, *Lab) ([]Result, error) {
	return func(ctx context.Context, l *Lab) ([]Result, error) {
		r, err := l.l7Rollout(ctx, c)
		if err != nil {
			return nil, err
		}
		return []Result{r}, nil
	}
}

// l7Rollout: a Deployment of 2 behind the proxy, `kubectl rollout restart`
// after 2 rounds of l7.Alternate. The proxy's logged upstream aborts are
// the ground truth of drainwatch's resets on reused connections: those of
// the old pods' terminations plus the workload's outside terminations
// (from Prometheus); its failed connects to the old pods that of their
// refusals and blackholed connections (l7Connects).
func (l *Lab) l7Rollout(ctx context.Context, c l7Case) (Result, error) {
	idle := l7ServerIdle
	if c.fixed {
		idle = l7FixedIdle
	}
	dep := cluster.ServerDeployment(c.ns, "web", workload.ModeProtocol, 2, "--idle-timeout="+idle.String(), "--drain-delay=2s")
	dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	old, err := l.deploy(ctx, dep)
	if err != nil {
		return Result{}, errorf("deploying", err)
	}
	undo, err := l7.DropPodFINs(l.Cluster.Fabric, cluster.ServerPort)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = undo() }()
	p, err := l7.Start(ctx, l7.Config{Kind: c.kind, Client: l.Cluster.Client, Namespace: c.ns, Service: "web",
		NetNS: l.Cluster.Fabric, Dir: filepath.Join(l.cfg.Out, fileName(c.name)), IdleTimeout: l7ProxyIdle, Retry: l7.RetryNone, Log: l.cfg.Log})
	if err != nil {
		return Result{}, errorf("starting "+string(c.kind), err)
	}
	defer p.Close()
	l.progress.Step("%s: %s at %s pools 30 s, the pods close idle connections after %v; a request, then rounds of one after 0.2 s and one after 1.5 s; rollout restart after 2 rounds",
		c.name, c.kind, p.Addr(), idle)
	seen, err := l.alternate(ctx, c, p.Addr())
	if err != nil {
		return Result{}, err
	}
	if err := p.Close(); err != nil {
		return Result{}, errorf("stopping "+string(c.kind), err)
	}
	logged, err := p.Counts()
	if err != nil {
		return Result{}, errorf(string(c.kind)+" logs", err)
	}
	return l.l7Result(ctx, c, old, seen, logged)
}

// alternate runs the client through the proxy with the rollout between
// its rounds, and waits for the rollout.
func (l *Lab) alternate(ctx context.Context, c l7Case, proxy string) (l7.Observed, error) {
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: l.Cluster.Fabric.DialContext, DisableKeepAlives: !c.keepAlive}}
	seen, err := l7.Alternate{Client: hc, URL: "http://" + proxy + "/work", Rounds: l7Rounds,
		Short: 200 * time.Millisecond, Long: 1500 * time.Millisecond, At: 2,
		Between: func(ctx context.Context) error {
			_, err := l.Cluster.Kubectl(ctx, "-n", c.ns, "rollout", "restart", "deployment/web")
			return err
		}}.Run(ctx)
	if err != nil {
		return seen, errorf("client", err)
	}
	if _, err := l.waitRolledOut(ctx, c.ns, "web"); err != nil {
		return seen, errorf("rollout", err)
	}
	return seen, nil
}

func (l *Lab) l7Result(ctx context.Context, c l7Case, old []corev1.Pod, seen l7.Observed, logged l7.Counts) (Result, error) {
	uids := make([]string, len(old))
	for i := range old {
		uids[i] = string(old[i].UID)
	}
	vs, err := l.WaitComplete(ctx, c.ns, uids...)
	if err != nil {
		return Result{}, err
	}
	inTerms := 0
	for _, v := range vs {
		inTerms += v.Counts.RequestsResetOnReusedConnections
	}
	steady, err := l.steadyReuse(ctx, c.ns, logged.Aborted()-inTerms)
	if err != nil {
		return Result{}, err
	}
	text := l.timelineCLI(ctx, c.ns, vs)
	l.record(c.name, c.ns, vs, text, map[string]any{"client": seen, "proxy": logged})
	r := Result{Name: c.name, Namespace: c.ns, Source: "api+prometheus", Diagnoses: diagnosisCodes(vs...),
		ProxyResetOnReuse: logged.Aborted(), DrainwatchResetOnReuse: inTerms + steady,
		Note: fmt.Sprintf("through %s: client %v, %d transport errors; proxy log %d requests, %d × 502, %d upstream aborts, %d no live upstreams; drainwatch %d in terminations, %d outside",
			c.kind, seen.Status, len(seen.Errs), logged.Requests, logged.Status[http.StatusBadGateway], logged.Aborted(), logged.NoLiveUpstreams, inTerms, steady),
	}
	l7Connects(&r, c.kind, old, vs, logged)
	return r, nil
}

// l7Connects sets the row's refused and blackholed pairs: the connects the
// proxy logged as failed to the old pods' addresses against the refusals
// after the stop signal and the blackholed connections of their
// terminations.
//
// Only the old pods' addresses: drainwatch counts refusals and blackholed
// connects per termination, and only the old pods terminate here. The
// proxy dials a new pod once it is Ready; a refusal there (a pod Ready
// before it listens) is that pod's startup refused_before_ready or
// refused_after_ready, in no termination. testenv's nodes hand out pod
// addresses round-robin, so no new pod has an old pod's address. An old
// pod listens from Ready until its stop signal (no preStop): the proxy's
// refusals to it fall after the stop signal, and those drainwatch counts
// before it are in the note.
//
// haproxy logs a connect a RST refused and one an ICMP unreachable ended
// alike (SC; l7.Kind.SeparatesUnreachable): its refused column compares
// the sum of its failed connects (SC and sC) with drainwatch's refused and
// blackholed, and its blackholed pair stays 0 = 0.
func l7Connects(r *Result, kind l7.Kind, old []corev1.Pod, vs []exporter.TerminationView, logged l7.Counts) {
	addrs := make([]string, len(old))
	for i := range old {
		addrs[i] = cluster.PodAddr(&old[i], cluster.ServerPort)
	}
	proxy, dw := logged.Sum(addrs...), sumCounts(vs...)
	inLog := fmt.Sprintf("%d refused, %d blackholed", proxy.Refused, proxy.Blackholed)
	if kind.SeparatesUnreachable() {
		r.ClientRefused, r.DrainwatchRefused = proxy.Refused, dw.RefusedAfterSigterm
		r.ClientBlackholed, r.DrainwatchBlackholed = proxy.Blackholed, dw.ConnectionsBlackholed
	} else {
		r.ClientRefused, r.DrainwatchRefused = proxy.Refused+proxy.Blackholed, dw.RefusedAfterSigterm+dw.ConnectionsBlackholed
		inLog = fmt.Sprintf("%d SC (refused or ICMP unreachable), %d sC (connect timeout): refused compares the sums", proxy.Refused, proxy.Blackholed)
	}
	r.Note += fmt.Sprintf("; connects to the old pods: proxy log %s; drainwatch %d refused after the stop signal (%d before), %d blackholed",
		inLog, dw.RefusedAfterSigterm, dw.RefusedBeforeSigterm, dw.ConnectionsBlackholed)
}

// steadyReuse reads the workload's resets on reused connections outside
// terminations from Prometheus once it reaches want (the daemons publish
// them at their next tick), or after 10 s.
func (l *Lab) steadyReuse(ctx context.Context, ns string, want int) (int, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	expr := fmt.Sprintf(`sum(drainwatch_requests_reset_on_reused_connections_outside_terminations_total{namespace=%q}) or vector(0)`, ns)
	got, err := l.Prom.QueryWhen(qctx, expr, func(s []promtest.Sample) bool { return len(s) == 1 && int(s[0].Value) >= want })
	if len(got) != 1 {
		return 0, fmt.Errorf("prometheus: %s: %v, %w", expr, got, err)
	}
	return int(got[0].Value), nil
}
