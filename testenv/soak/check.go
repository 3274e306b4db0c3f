package soak

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
)

// completeTimeout bounds the wait for a round's terminations: the daemon's
// kernel tail (5 s) after the last pod is gone, with room for a loaded
// machine.
const completeTimeout = 5 * time.Minute

// check waits for the replaced pods' terminations and compares each with
// the ground truth: not partial, refused (after and before the stop
// signal) = the router's refusals by that pod, probe_refused = the kubelet
// prober's refused probes since the pod's Killing, requests killed = 0 as
// the node agent sent no SIGKILL (a naive server drains what it accepted).
func (s *soak) check(ctx context.Context, rd *Round, old []corev1.Pod, conns []router.Conn) error {
	refused := map[string]int{}
	for _, c := range conns {
		if c.Outcome == router.Refused {
			refused[c.Backend]++
		}
	}
	views, err := s.waitComplete(ctx, old, rd.Started)
	if err != nil {
		return fmt.Errorf("round %d: %w", rd.Index, err)
	}
	for i := range old {
		want, err := s.truth(&old[i], refused)
		if err != nil {
			return err
		}
		if msg := compare(views[i], want); msg != "" {
			s.report.Inexact = append(s.report.Inexact, fmt.Sprintf("round %d: %s: %s", rd.Index, old[i].Name, msg))
			s.cfg.Progress.Step("NOT EXACT round %d: %s: %s (evidence in %s)", rd.Index, old[i].Name, msg,
				s.evidence(rd.Index, &old[i], views[i], conns))
		} else {
			rd.Exact++
		}
		rd.Refused += want.refused
	}
	rd.Replaced, rd.Took = len(old), time.Since(rd.Started)
	s.terminations += len(old)
	s.report.Rounds = append(s.report.Rounds, *rd)
	s.cfg.Progress.Step("round %d: %d of %d terminations exact, router refused %d, clients %s, took %v",
		rd.Index, rd.Exact, rd.Replaced, rd.Refused, rd.ClientOutput, rd.Took.Round(100*time.Millisecond))
	return nil
}

// truth is one pod's ground truth.
type truth struct{ refused, probes int }

func (s *soak) truth(p *corev1.Pod, refused map[string]int) (truth, error) {
	terms := s.cluster.Terminations(p.UID)
	if len(terms) == 0 {
		return truth{}, fmt.Errorf("pod %s: no termination by its node agent", p.Name)
	}
	for _, t := range terms {
		if !t.SIGKILLAt.IsZero() {
			return truth{}, fmt.Errorf("pod %s: the node agent sent SIGKILL (a naive server should drain within its grace)", p.Name)
		}
	}
	probes, err := s.cluster.ProbeRefusals(p, terms[0].Killing)
	if err != nil {
		return truth{}, err
	}
	return truth{refused: refused[cluster.PodAddr(p, cluster.ServerPort)], probes: probes}, nil
}

// compare says how a termination differs from the truth ("" if exact).
func compare(v exporter.TerminationView, want truth) string {
	c := v.Counts
	got := truth{refused: c.RefusedAfterSigterm + c.RefusedBeforeSigterm, probes: c.ProbeRefused}
	switch {
	case v.Partial:
		return fmt.Sprintf("partial %v", v.PartialReasons)
	case got != want:
		return fmt.Sprintf("drainwatch refused %d probe_refused %d, ground truth %d and %d", got.refused, got.probes, want.refused, want.probes)
	case c.RequestsKilledBySigkill != 0:
		return fmt.Sprintf("drainwatch counted %d requests killed, no SIGKILL was sent", c.RequestsKilledBySigkill)
	}
	return ""
}

// waitComplete waits until the daemon's API reports every pod's
// termination complete and returns them in the order of pods. It asks for
// the round's terminations only (since its start): the daemon keeps every
// earlier one, and serving them all twice a second would weigh on what the
// soak measures.
func (s *soak) waitComplete(ctx context.Context, pods []corev1.Pod, since time.Time) ([]exporter.TerminationView, error) {
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	f := exporter.Filter{Namespace: namespace, Since: since}
	for {
		vs, errs := exporter.QueryDaemons(ctx, []exporter.Daemon{s.daemon.API()}, f)
		got, ok := completeOf(vs, pods)
		if ok {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("terminations of %d pods not complete (query errors %v): %w", len(pods), errs, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func completeOf(vs []exporter.TerminationView, pods []corev1.Pod) ([]exporter.TerminationView, bool) {
	out := make([]exporter.TerminationView, len(pods))
	for i, p := range pods {
		j := slices.IndexFunc(vs, func(v exporter.TerminationView) bool { return v.PodUID == string(p.UID) })
		if j < 0 || !vs[j].Complete {
			return nil, false
		}
		out[i] = vs[j]
	}
	return out, true
}
