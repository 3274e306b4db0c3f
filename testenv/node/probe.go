package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// probeKind is readiness or liveness.
type probeKind string

const (
	readiness probeKind = "Readiness"
	liveness  probeKind = "Liveness"
	startup   probeKind = "Startup"
)

// probeResult is a change of a probe's verdict (after the thresholds).
type probeResult struct {
	kind      probeKind
	container *container
	passing   bool
}

// prober runs one probe of one container at its period until ctx ends,
// and reports verdict changes: success/failure thresholds are counted like
// the kubelet's worker (readiness starts failing, liveness passing).
type prober struct {
	a       *Agent
	pod     *corev1.Pod
	podIP   string
	c       *container
	kind    probeKind
	spec    *corev1.Probe
	results chan<- probeResult
}

func (p *prober) run(ctx context.Context) {
	passing := p.kind == liveness
	ok, bad := 0, 0
	select {
	case <-time.After(time.Duration(p.spec.InitialDelaySeconds) * time.Second):
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(time.Duration(max(p.spec.PeriodSeconds, 1)) * time.Second)
	defer tick.Stop()
	for {
		err := p.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			ok, bad = ok+1, 0
		} else {
			ok, bad = 0, bad+1
			msg := err.Error()
			if e, ok := err.(*execError); ok {
				msg = e.output
			}
			p.a.events.record(p.pod, p.c.spec.Name, corev1.EventTypeWarning, ReasonUnhealthy,
				fmt.Sprintf("%s probe failed: %s", p.kind, msg))
		}
		changed, final := p.verdict(&passing, ok, bad)
		if changed {
			select {
			case p.results <- probeResult{kind: p.kind, container: p.c, passing: passing}:
			case <-ctx.Done():
				return
			}
		}
		if final {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// verdict flips passing when the consecutive count reaches its threshold.
// A startup probe reports once, success or failure, and is then done
// (final).
func (p *prober) verdict(passing *bool, ok, bad int) (changed, final bool) {
	succeeded := ok >= int(max(p.spec.SuccessThreshold, 1))
	failed := bad >= int(max(p.spec.FailureThreshold, 1))
	switch {
	case p.kind == startup && (succeeded || failed):
		*passing = succeeded
		return true, true
	case !*passing && succeeded:
		*passing = true
		return true, false
	case *passing && failed:
		*passing = false
		return true, false
	}
	return false, false
}

func (p *prober) once(ctx context.Context) error {
	timeout := time.Duration(max(p.spec.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := handler{Exec: p.spec.Exec, HTTPGet: p.spec.HTTPGet, TCPSocket: p.spec.TCPSocket, probe: true}
	return p.a.runHandler(ctx, h, p.c, p.podIP)
}
