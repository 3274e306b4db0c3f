package kubeproxy

import (
	"context"
	"fmt"
	"time"
)

const pollEvery = 50 * time.Millisecond

// waitHealthy polls healthz until kube-proxy answers 200 (its first sync is
// done), it exits, or ctx or one minute ends.
func (p *Proxy) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if err := p.exited(); err != nil {
			return err
		}
		if _, last = p.get(ctx, HealthzPort, "/healthz"); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-proxy %s not healthy (log %s): %w", p.cfg.Node, p.Log(), last)
		case <-time.After(pollEvery):
		}
	}
}

// WaitProgrammed waits until kube-proxy has received a Service or
// EndpointSlice change after before (its Metrics taken before the change)
// and has programmed every change it received, and returns the metrics then:
// their LastSync is when the change took effect on this node.
func (p *Proxy) WaitProgrammed(ctx context.Context, before Metrics) (Metrics, error) {
	return p.waitMetrics(ctx, "a change programmed", func(m Metrics) bool {
		return m.EndpointChanges+m.ServiceChanges > before.EndpointChanges+before.ServiceChanges &&
			m.EndpointChangesPending == 0 && m.ServiceChangesPending == 0
	})
}

func (p *Proxy) waitMetrics(ctx context.Context, what string, done func(Metrics) bool) (Metrics, error) {
	for {
		if err := p.exited(); err != nil {
			return Metrics{}, err
		}
		m, err := p.Metrics(ctx)
		if err == nil && done(m) {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, fmt.Errorf("kube-proxy %s: waiting for %s (last %+v, err %v): %w", p.cfg.Node, what, m, err, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}
