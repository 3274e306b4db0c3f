package kubeproxy

import (
	"context"
	"sync"
	"time"
)

// SyncRecorder records every rules sync kube-proxy reports, by the time it
// reports (kubeproxy_sync_proxy_rules_last_timestamp_seconds), polled every
// 50 ms. Syncs closer together than that are seen as one, the later: with
// minSyncPeriod ≥ 50 ms there are none.
type SyncRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	syncs  []time.Time
}

// RecordSyncs starts recording until Stop or ctx ends.
func (p *Proxy) RecordSyncs(ctx context.Context) *SyncRecorder {
	ctx, cancel := context.WithCancel(ctx)
	r := &SyncRecorder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			if m, err := p.Metrics(ctx); err == nil {
				r.note(m.LastSync)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(pollEvery):
			}
		}
	}()
	return r
}

func (r *SyncRecorder) note(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.syncs); !at.IsZero() && (n == 0 || at.After(r.syncs[n-1])) {
		r.syncs = append(r.syncs, at)
	}
}

// Stop ends the recording and returns the syncs seen, oldest first (the
// first is the last sync before recording started).
func (r *SyncRecorder) Stop() []time.Time {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs
}

// FirstSyncAfter is the first of syncs after t, zero when none.
func FirstSyncAfter(syncs []time.Time, t time.Time) time.Time {
	for _, s := range syncs {
		if s.After(t) {
			return s
		}
	}
	return time.Time{}
}
