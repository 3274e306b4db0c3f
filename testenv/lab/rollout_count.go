package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/promtest"
	"github.com/drainwatch/drainwatch/testenv/router"
)

// revisionLabels name the replaced revisions in the table.
var revisionLabels = []string{"no preStop", "preStop sleep 2s"}

// countRollout compares, per revision of the replaced pods, the refusals
// the router met (it is the pods' client) with Prometheus's
// drainwatch_connections_refused_after_sigterm_total by revision.
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
	clients := l.clientsByRevision(run, revOf)
	l.progress.Block(rolloutLines(vs))
	var out []Result
	for i, h := range run.hashes {
		rev := revOf[h]
		out = append(out, revisionResult(i, rev, clients[rev], prom, vs, run))
	}
	return out, nil
}

// revCount is one revision's refused and killed.
type revCount struct{ refused, killed int }

// clientsByRevision: refusals are the router's Refused records by
// backend; killed are client requests proxied to a pod that got SIGKILL and
// cut by it (see groundtruth.go).
func (l *Lab) clientsByRevision(run *rolloutRun, revOf map[string]string) map[string]revCount {
	out := map[string]revCount{}
	byLocal := map[string]router.Conn{}
	for _, c := range run.conns {
		byLocal[c.Client] = c
		if p, ok := run.pods.byAddr(c.Backend); ok && c.Outcome == router.Refused {
			rc := out[revOf[p.Hash]]
			rc.refused++
			out[revOf[p.Hash]] = rc
		}
	}
	for _, r := range run.reqs {
		c, ok := byLocal[r.Local]
		p, known := run.pods.byAddr(c.Backend)
		if !ok || !known || c.Outcome != router.Proxied {
			continue
		}
		if Killed(r, l.deathOf(p.UID)) {
			rc := out[revOf[p.Hash]]
			rc.killed++
			out[revOf[p.Hash]] = rc
		}
	}
	return out
}

// deathOf is when the node agent SIGKILLed a container of the pod and when
// that container was gone (zero: no SIGKILL).
func (l *Lab) deathOf(uid string) Death {
	for _, t := range l.Cluster.Terminations(typesUID(uid)) {
		if !t.SIGKILLAt.IsZero() {
			return Death{t.SIGKILLAt, t.ExitAt}
		}
	}
	return Death{}
}

// promCounts are Prometheus's sums by revision of the namespace.
type promCounts struct{ refused, killed map[string]int }

// promByRevision waits until Prometheus has scraped every termination
// (terminations_total by revision equals want), then reads the counters.
func (l *Lab) promByRevision(ctx context.Context, want map[string]int) (promCounts, error) {
	sel := fmt.Sprintf(`{namespace=%q}`, rolloutNS)
	terms := "sum by (revision) (drainwatch_terminations_total" + sel + ")"
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := l.Prom.QueryWhen(qctx, terms, func(s []promtest.Sample) bool { return equalCounts(byRevision(s), want) })
	if err != nil {
		return promCounts{}, fmt.Errorf("prometheus: %w", err)
	}
	var pc promCounts
	for _, q := range []struct {
		metric string
		into   *map[string]int
	}{{"drainwatch_connections_refused_after_sigterm_total", &pc.refused}, {"drainwatch_requests_killed_by_sigkill_total", &pc.killed}} {
		expr := "sum by (revision) (" + q.metric + sel + ")"
		s, err := l.Prom.Query(ctx, expr)
		if err != nil {
			return pc, fmt.Errorf("prometheus: %w", err)
		}
		*q.into = byRevision(s)
		l.progress.Step("prometheus: %s = %v", expr, *q.into)
	}
	return pc, nil
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
func revisionResult(i int, rev string, c revCount, prom promCounts, vs []exporter.TerminationView, run *rolloutRun) Result {
	var mine []exporter.TerminationView
	for _, v := range vs {
		if v.Workload.Revision == rev {
			mine = append(mine, v)
		}
	}
	api := sumCounts(mine...)
	r := Result{Name: fmt.Sprintf("rollout/revision-%s (%s)", rev, revisionLabels[i]), Namespace: rolloutNS, Source: "prometheus",
		ClientRefused: c.refused, DrainwatchRefused: prom.refused[rev], ClientKilled: c.killed,
		DrainwatchKilled: prom.killed[rev], Diagnoses: diagnosisCodes(mine...),
		Note: fmt.Sprintf("%d pods; api: refused %d killed %d; whole run: clients %s, router %s", len(mine),
			api.RefusedAfterSigterm, api.RequestsKilledBySigkill, client.Summarize(run.reqs), routerSummary(run.conns))}
	if api.RefusedAfterSigterm != prom.refused[rev] || api.RequestsKilledBySigkill != prom.killed[rev] {
		r.Error = fmt.Sprintf("prometheus (refused %d, killed %d) differs from the daemons' API (refused %d, killed %d)",
			prom.refused[rev], prom.killed[rev], api.RefusedAfterSigterm, api.RequestsKilledBySigkill)
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
