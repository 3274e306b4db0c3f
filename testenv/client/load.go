package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Load is an open-loop load: request i is sent at Start + i×Interval, whether
// or not earlier requests have finished, as long as i < Count and
// i×Interval < Duration. Both bounds are required.
type Load struct {
	Dial     DialFunc
	Target   string
	Path     string
	Interval time.Duration
	Count    int
	Duration time.Duration
	Timeout  time.Duration // per request; 2 s when zero
}

// Planned is the number of requests Run sends unless ctx ends first:
// min(Count, ceil(Duration/Interval)).
func (l Load) Planned() int {
	n := int((l.Duration + l.Interval - 1) / l.Interval)
	return min(n, l.Count)
}

func (l Load) validate() error {
	if l.Interval <= 0 || l.Count <= 0 || l.Duration <= 0 {
		return fmt.Errorf("load to %s: interval, count and duration must all be positive (got %v, %d, %v)",
			l.Target, l.Interval, l.Count, l.Duration)
	}
	return nil
}

// Run sends the load and returns every request's record, in send order, once
// all have ended.
func (l Load) Run(ctx context.Context) ([]Request, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	timeout := l.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	reqs := make([]Request, l.Planned())
	var wg sync.WaitGroup
	start := time.Now()
	sent := 0
	for i := range reqs {
		if !sleepUntil(ctx, start.Add(time.Duration(i)*l.Interval)) {
			break
		}
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs[i] = Get(ctx, l.Dial, l.Target, l.Path, timeout, nil)
			reqs[i].Seq = i
		}()
	}
	wg.Wait()
	return reqs[:sent], ctx.Err()
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
