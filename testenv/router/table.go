package router

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Change is one endpoint set the router learned about: when the EndpointSlice
// informer delivered it, and when the router started using it (Seen + delay).
type Change struct {
	Seen     time.Time
	Applied  time.Time // zero while pending
	Backends []string  // ready "ip:port", sorted
}

// Table holds the backends new connections go to. Observed sets take effect
// after the propagation delay, in the order they were observed: the load
// balancer that has not been told yet.
type Table struct {
	delay time.Duration
	wake  chan struct{}

	mu      sync.Mutex
	current []string
	next    int
	changes []Change // every change, applied ones first
	applied int      // changes[:applied] are applied
}

// NewTable returns a table that applies changes delay after observing them.
func NewTable(delay time.Duration) *Table {
	return &Table{delay: delay, wake: make(chan struct{}, 1)}
}

// Observe queues a new backend set, applied delay from now. Initial, when
// true, applies it at once: the state a load balancer starts with.
func (t *Table) Observe(backends []string, initial bool) {
	b := slices.Sorted(slices.Values(backends))
	t.mu.Lock()
	now := time.Now()
	t.changes = append(t.changes, Change{Seen: now, Backends: b})
	if initial && t.applied == len(t.changes)-1 {
		t.applyLocked(now)
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Table) applyLocked(now time.Time) {
	c := &t.changes[t.applied]
	c.Applied = now
	t.current = c.Backends
	t.applied++
}

// Run applies queued changes when their delay has passed, until ctx ends.
func (t *Table) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := t.applyDue()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		case <-timer.C:
		}
	}
}

// applyDue applies every due change and returns how long until the next one.
func (t *Table) applyDue() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.applied < len(t.changes) {
		due := t.changes[t.applied].Seen.Add(t.delay)
		now := time.Now()
		if now.Before(due) {
			return due.Sub(now)
		}
		t.applyLocked(now)
	}
	return time.Hour
}

// Pick returns the next backend, round-robin over the applied set.
func (t *Table) Pick() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.current) == 0 {
		return "", false
	}
	b := t.current[t.next%len(t.current)]
	t.next++
	return b, true
}

// Backends returns the applied set.
func (t *Table) Backends() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.current)
}

// Changes returns every observed change, pending ones with a zero Applied.
func (t *Table) Changes() []Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.changes)
}
