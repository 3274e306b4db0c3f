package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/cluster"
)

// labStartupWindow is the lab daemons' --startup-window: the scenario's
// clients are done 4 s after Ready.
const labStartupWindow = 10 * time.Second

// startupCase is one startup scenario: its Deployment, and whether its
// clients send a request on each connection.
type startupCase struct {
	name, ns string
	dep      func(ns string) *appsv1.Deployment
	request  bool
}

// startupScenario: a new pod whose readiness probe passes before its
// traffic port listens (ReadyBeforeListening); the clients' refusals sent
// before and after the daemon's Ready mark against drainwatch's
// refused_before_ready and refused_after_ready, from the daemon's
// /api/v1/startups and from Prometheus.
func startupScenario(ctx context.Context, l *Lab) ([]Result, error) {
	return l.startup(ctx, startupCase{name: "startup/ready-before-listening", ns: "lab-startup-ready-before-listening", dep: ReadyBeforeListening})
}

// startupResetsScenario: a new pod whose readiness probe passes while its
// server still resets every request (ResetsAfterReady); the clients'
// connections reset after the daemon's Ready mark against drainwatch's
// reset_after_ready.
func startupResetsScenario(ctx context.Context, l *Lab) ([]Result, error) {
	return l.startup(ctx, startupCase{name: "startup/resets-after-ready", ns: "lab-startup-resets-after-ready", dep: ResetsAfterReady, request: true})
}

func (l *Lab) startup(ctx context.Context, c startupCase) ([]Result, error) {
	name, ns := c.name, c.ns
	if err := l.Cluster.Apply(ctx, cluster.Namespace(ns), c.dep(ns)); err != nil {
		return nil, errorf("deploying", err)
	}
	pod, err := WaitAddressed(ctx, l.Cluster.Client, ns, "web")
	if err != nil {
		return nil, err
	}
	d := l.daemonOn(pod.Spec.NodeName)
	if d == nil {
		return nil, fmt.Errorf("no daemon on node %q", pod.Spec.NodeName)
	}
	uid := string(pod.UID)
	if _, err := waitStartup(ctx, d, uid, func(s correlate.Startup) bool { return s.NetnsBound }); err != nil {
		return nil, errorf("waiting for the daemon to watch the pod", err)
	}
	what := "connect"
	if c.request {
		what = "connect and GET /work"
	}
	l.progress.Step("%s: pod %s on %s: %d clients %s straight at %s", name, pod.Name, pod.Spec.NodeName, startupClients, what,
		cluster.PodAddr(&pod, cluster.ServerPort))
	clients := &StartupClients{Dial: l.Cluster.Dial, Client: l.Cluster.Client, Pod: pod, Request: c.request,
		DaemonReady: func(ctx context.Context) time.Time { s, _ := startupOf(ctx, d, uid); return s.Marks.Ready }}
	if err := clients.Run(ctx); err != nil {
		return nil, errorf("clients", err)
	}
	got, err := waitStartup(ctx, d, uid, func(s correlate.Startup) bool { return s.Complete })
	if err != nil {
		return nil, errorf("waiting for the complete startup", err)
	}
	seen, err := clients.Split(got.Marks.Ready)
	if err != nil {
		return nil, err
	}
	l.record(name, ns, nil, "", map[string]any{"attempts": clients.Attempts, "startup": got})
	return []Result{l.startupResult(ctx, name, ns, got, seen)}, nil
}

// startupResult is the row: clients against the daemon's record, and the
// record against Prometheus; a first accept outside the first accepted
// client's connect is an error.
func (l *Lab) startupResult(ctx context.Context, name, ns string, got correlate.Startup, seen StartupSplit) Result {
	r := Result{Name: name, Namespace: ns, Source: "startups", Diagnoses: []string{},
		ClientRefusedBeforeReady: seen.RefusedBefore, DrainwatchRefusedBeforeReady: got.Counts.RefusedBeforeReady,
		ClientRefusedAfterReady: seen.RefusedAfter, DrainwatchRefusedAfterReady: got.Counts.RefusedAfterReady,
		ClientResetAfterReady: seen.ResetAfter, DrainwatchResetAfterReady: got.Counts.ResetAfterReady}
	for _, d := range got.Diagnoses {
		r.Diagnoses = append(r.Diagnoses, d.Code)
	}
	fa := got.Marks.FirstAccept
	r.Note = fmt.Sprintf("%d attempts, %d reset before Ready; ready_to_first_accept %s; probes refused %d",
		seen.Attempts, seen.ResetBefore, correlate.FormatSecondsMs(got.ReadyToFirstAccept), got.Counts.ProbeRefused)
	const slack = 5 * time.Millisecond
	switch {
	case got.Partial:
		r.Error = fmt.Sprintf("startup partial: %v", got.PartialReasons)
	case seen.First == nil || fa.Before(seen.First.Sent.Add(-slack)) || fa.After(seen.First.Done.Add(slack)):
		r.Error = fmt.Sprintf("first accept %s outside the first accepted client's connect", fa)
	default:
		r.Error = l.startupProm(ctx, ns, got.Counts)
	}
	return r
}

// startupProm compares the revision's startup counters in Prometheus with
// the daemon's record (the namespace has this one pod), read until they
// agree (30 s).
func (l *Lab) startupProm(ctx context.Context, ns string, n correlate.StartupCounts) string {
	sel := fmt.Sprintf(`{namespace=%q}`, ns)
	want := [3]int{n.RefusedBeforeReady, n.RefusedAfterReady, n.ResetAfterReady}
	var prom [3]int
	deadline := time.Now().Add(promAgreeTimeout)
	for {
		for i, m := range []string{"drainwatch_connections_refused_before_ready_total", "drainwatch_connections_refused_after_ready_total",
			"drainwatch_connections_reset_after_ready_total"} {
			s, err := l.Prom.Query(ctx, "sum("+m+sel+")")
			if err != nil {
				return "prometheus: " + err.Error()
			}
			prom[i] = first(s)
		}
		if prom == want {
			return ""
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("prometheus refused before Ready, refused and reset after Ready %v, the daemon's API %v", prom, want)
		}
		time.Sleep(time.Second)
	}
}

func (l *Lab) daemonOn(node string) *Daemon {
	for _, d := range l.Daemons {
		if d.Node == node {
			return d
		}
	}
	return nil
}

// startupOf reads the daemon's startup of uid from /api/v1/startups.
func startupOf(ctx context.Context, d *Daemon, uid string) (correlate.Startup, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/api/v1/startups?limit="+url.QueryEscape(fmt.Sprint(exporter.MaxPageSize)), nil)
	if err != nil {
		return correlate.Startup{}, false
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return correlate.Startup{}, false
	}
	defer resp.Body.Close()
	var list exporter.StartupList
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return correlate.Startup{}, false
	}
	for _, s := range list.Startups {
		if s.PodUID == uid {
			return s, true
		}
	}
	return correlate.Startup{}, false
}

// waitStartup polls the daemon until its startup of uid satisfies ok.
func waitStartup(ctx context.Context, d *Daemon, uid string, ok func(correlate.Startup) bool) (correlate.Startup, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if s, found := startupOf(ctx, d, uid); found && ok(s) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return correlate.Startup{}, fmt.Errorf("startup of %s on %s: %w", uid, d.Node, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
