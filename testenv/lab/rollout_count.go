package lab

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/promtest"
	"github.com/drainwatch/drainwatch/testenv/router"
)

// revisionLabels name the replaced revisions in the table.
var revisionLabels = []string{"no preStop", "no preStop, replaced by advise's patch", "the advised preStop"}

// countRollout compares, per revision of the replaced pods, what the
// router met (it is the pods' client) and the kubelet prober saw with
// Prometheus's counters by revision.
func (l *Lab) countRollout(ctx context.Context, run *rolloutRun) ([]Result, error) {
	revOf, err := revisions(ctx, l.Cluster.Client, rolloutNS)
	if err != nil {
		return nil, err
	}
	var uids []string
	want := map[string]int{}
	for _, h := range run.hashes {
		for _, p := range run.pods.withHash(h) {
			uids = append(uids, p.UID)
			want[revOf[h]]++
		}
	}
	l.progress.Step("rollout: waiting for drainwatch's %d terminations to be complete", len(uids))
	vs, err := l.WaitComplete(ctx, rolloutNS, uids...)
	if err != nil {
		return nil, err
	}
	l.record("rollout", rolloutNS, vs, l.timelineCLI(ctx, rolloutNS, vs), map[string]any{"requests": run.reqs, "router": run.conns})
	prom, err := l.promByRevision(ctx, want)
	if err != nil {
		return nil, err
	}
	clients, err := l.clientsByRevision(run, revOf)
	if err != nil {
		return nil, err
	}
	l.progress.Block(rolloutLines(vs))
	var out []Result
	for i, h := range run.hashes {
		rev := revOf[h]
		out = append(out, revisionResult(i, rev, clients[rev], prom[rev], vs, run))
	}
	return out, nil
}

// revCount is one revision's refused, killed, probe refused and reset at
// shutdown.
type revCount = promTotals

// clientsByRevision: refusals are the router's Refused records by
// backend, blackholed its dials that failed otherwise; killed are client requests proxied to a pod that got SIGKILL and
// cut by it (see groundtruth.go); resets at shutdown are the router's
// connections the pod reset or closed unanswered while alive; probe
// refusals are the kubelet prober's own count per pod.
func (l *Lab) clientsByRevision(run *rolloutRun, revOf map[string]string) (map[string]revCount, error) {
	out := map[string]revCount{}
	add := func(p podRecord, f func(*revCount)) {
		rc := out[revOf[p.Hash]]
		f(&rc)
		out[revOf[p.Hash]] = rc
	}
	pair := router.Join(run.reqs, run.conns)
	reqOf := make([]*client.Request, len(run.conns))
	for j, i := range pair {
		if i >= 0 {
			reqOf[i] = &run.reqs[j]
		}
	}
	for i, c := range run.conns {
		p, ok := run.pods.byAddr(c.Backend)
		if !ok {
			continue
		}
		if c.Outcome == router.Refused {
			add(p, func(rc *revCount) { rc.refused++ })
		}
		if BlackholedByBackend(c) {
			add(p, func(rc *revCount) { rc.blackholed++ })
		}
		var req client.Request
		if reqOf[i] != nil {
			req = *reqOf[i]
		}
		if ResetByBackend(c) && !Killed(req, l.deathOf(p.UID)) {
			add(p, func(rc *revCount) { rc.resets++ })
		}
		if reqOf[i] != nil && c.Outcome == router.Proxied && Killed(req, l.deathOf(p.UID)) {
			add(p, func(rc *revCount) { rc.killed++ })
		}
	}
	for _, h := range run.hashes {
		for _, p := range run.pods.withHash(h) {
			n, err := l.probeRefusals(p)
			if err != nil {
				return nil, err
			}
			add(p, func(rc *revCount) { rc.probes += n })
		}
	}
	return out, nil
}

// ResetByBackend: the router's connection to the pod was reset by it (an
// accept-queue connection reset at the listener's close, a handshake the
// closed listener left half-open; a reset that came before the router's
// connect returned fails the dial with ECONNRESET) or closed without a byte
// of answer. The router is the pod's client; it passes each on to its own
// client as a reset or an EOF.
func ResetByBackend(c router.Conn) bool {
	switch c.Outcome {
	case router.Proxied:
		return c.BackendReset || c.BackendSilent
	case router.DialError:
		return strings.Contains(c.Err, syscall.ECONNRESET.Error())
	}
	return false
}

// BlackholedByBackend: the router's dial to the pod failed without a
// refusal and without a reset (a timeout, no route to host): the pod's
// network was gone, and the router's client got nothing.
func BlackholedByBackend(c router.Conn) bool {
	return c.Outcome == router.DialError && !ResetByBackend(c)
}

// probeRefusals is the kubelet prober's count of refused probes at a
// replaced pod since its node agent began to kill it (the Killing event;
// the deletion's timestamp has whole seconds only).
func (l *Lab) probeRefusals(p podRecord) (int, error) {
	var since time.Time
	for _, t := range l.Cluster.Terminations(typesUID(p.UID)) {
		if since.IsZero() || t.Killing.Before(since) {
			since = t.Killing
		}
	}
	if since.IsZero() {
		return 0, fmt.Errorf("pod %s: no termination by its node agent", p.Name)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rolloutNS, Name: p.Name}, Spec: corev1.PodSpec{NodeName: p.Node}}
	n, err := l.Cluster.ProbeRefusals(pod, since)
	if err != nil {
		return 0, errorf("kubelet prober", err)
	}
	return n, nil
}

// deathOf is when the node agent SIGKILLed a container of the pod and when
// that container was gone (zero: no SIGKILL).
func (l *Lab) deathOf(uid string) Death {
	for _, t := range l.Cluster.Terminations(typesUID(uid)) {
		if !t.SIGKILLAt.IsZero() {
			return Death{SIGKILL: t.SIGKILLAt, Exit: t.ExitAt}
		}
	}
	return Death{}
}

// promByRevision waits until Prometheus has scraped every termination
// (terminations_total by revision equals want), then reads the counters.
func (l *Lab) promByRevision(ctx context.Context, want map[string]int) (map[string]promTotals, error) {
	sel := fmt.Sprintf(`{namespace=%q}`, rolloutNS)
	terms := "sum by (revision) (drainwatch_terminations_total" + sel + ")"
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := l.Prom.QueryWhen(qctx, terms, func(s []promtest.Sample) bool { return equalCounts(byRevision(s), want) })
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	out := map[string]promTotals{}
	for i, metric := range counterMetrics {
		expr := "sum by (revision) (" + metric + sel + ")"
		s, err := l.Prom.Query(ctx, expr)
		if err != nil {
			return nil, fmt.Errorf("prometheus: %w", err)
		}
		for rev, v := range byRevision(s) {
			t := out[rev]
			*t.fields()[i] = v
			out[rev] = t
		}
		l.progress.Step("prometheus: %s = %v", expr, byRevision(s))
	}
	return out, nil
}

func byRevision(s []promtest.Sample) map[string]int {
	out := map[string]int{}
	for _, x := range s {
		out[x.Labels["revision"]] = int(x.Value)
	}
	return out
}

func equalCounts(got, want map[string]int) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return len(got) >= len(want)
}

// revisionResult is the table row of the i-th replaced revision.
func revisionResult(i int, rev string, c revCount, prom promTotals, vs []exporter.TerminationView, run *rolloutRun) Result {
	var mine []exporter.TerminationView
	for _, v := range vs {
		if v.Workload.Revision == rev {
			mine = append(mine, v)
		}
	}
	sum := sumCounts(mine...)
	api := promTotals{sum.RefusedAfterSigterm, sum.RequestsKilledBySigkill, sum.RequestsKilledAtExit, sum.ProbeRefused, sum.ConnectionsResetAtShutdown, sum.ConnectionsBlackholed}
	r := Result{Name: fmt.Sprintf("rollout/revision-%s (%s)", rev, revisionLabels[i]), Namespace: rolloutNS, Revision: rev, Source: "prometheus",
		ClientRefused: c.refused, DrainwatchRefused: prom.refused, ClientKilled: c.killed, DrainwatchKilled: prom.killed,
		// The rollout's naive servers drain before they exit: the router
		// saw nothing cut by an exit, and drainwatch must say the same.
		DrainwatchKilledAtExit: prom.killedAtExit,
		ProberProbeRefused:     c.probes, DrainwatchProbeRefused: prom.probes,
		ClientResetAtShutdown: c.resets, DrainwatchResetAtShutdown: prom.resets,
		ClientBlackholed: c.blackholed, DrainwatchBlackholed: prom.blackholed, Diagnoses: diagnosisCodes(mine...),
		Note: fmt.Sprintf("%d pods; api %s; whole run: clients %s, router %s", len(mine),
			api, client.Summarize(run.reqs), routerSummary(run.conns))}
	switch i {
	case 1:
		r.Note += "; advise -o patch, applied: " + run.advice
	case 2:
		r.Note += "; advise -o patch once it was replaced: " + run.adviceAfter
	}
	if api != prom {
		r.Error = fmt.Sprintf("prometheus %s differs from the daemons' API %s", prom, api)
	}
	return r
}

func routerSummary(conns []router.Conn) string {
	n := map[string]int{}
	for _, c := range conns {
		n[c.Outcome]++
	}
	return fmt.Sprintf("proxied=%d refused=%d dial_error=%d no_backend=%d", n[router.Proxied], n[router.Refused],
		n[router.DialError], n[router.NoBackend])
}

// rolloutLines prints one line per termination of the rolling update.
func rolloutLines(vs []exporter.TerminationView) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  revision %s  %-28s %-8s refused %3d  killed %d  %v\n", v.Workload.Revision, v.Pod, v.Node,
			v.Counts.RefusedAfterSigterm, v.Counts.RequestsKilledBySigkill, diagnosisCodes(v))
	}
	return b.String()
}
