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

// WaitSynced waits until kube-proxy has written its rules at or after since
// with no Service or EndpointSlice change pending, and returns that sync's
// time: a change the API had committed before since is programmed by then,
// once kube-proxy has received it (see WaitChanges).
func (p *Proxy) WaitSynced(ctx context.Context, since time.Time) (Metrics, error) {
	return p.waitMetrics(ctx, "a sync after "+since.Format(time.StampMilli), func(m Metrics) bool {
		return !m.LastSync.Before(since) && m.EndpointChangesPending == 0 && m.ServiceChangesPending == 0
	})
}

// WaitChanges waits until kube-proxy has received more than endpoints
// EndpointSlice changes in all (Metrics.EndpointChanges, taken before the
// change) and has programmed every change it received.
func (p *Proxy) WaitChanges(ctx context.Context, endpoints float64) (Metrics, error) {
	return p.waitMetrics(ctx, fmt.Sprintf("more than %.0f endpoint changes programmed", endpoints), func(m Metrics) bool {
		return m.EndpointChanges > endpoints && m.EndpointChangesPending == 0 && m.ServiceChangesPending == 0
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
