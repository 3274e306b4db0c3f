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
		if changed := p.verdict(&passing, ok, bad); changed {
			select {
			case p.results <- probeResult{kind: p.kind, container: p.c, passing: passing}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// verdict flips passing when the consecutive count reaches its threshold.
func (p *prober) verdict(passing *bool, ok, bad int) bool {
	switch {
	case !*passing && ok >= int(max(p.spec.SuccessThreshold, 1)):
		*passing = true
		return true
	case *passing && bad >= int(max(p.spec.FailureThreshold, 1)):
		*passing = false
		return true
	}
	return false
}

func (p *prober) once(ctx context.Context) error {
	timeout := time.Duration(max(p.spec.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := handler{Exec: p.spec.Exec, HTTPGet: p.spec.HTTPGet, TCPSocket: p.spec.TCPSocket, probe: true}
	return p.a.runHandler(ctx, h, p.c, p.podIP)
}
