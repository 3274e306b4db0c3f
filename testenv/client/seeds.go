package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Seeds is the seeds' experiment as a reusable scenario: start one /slow
// request, deliver the stop (SIGTERM, or a pod deletion), then for Window send
// /work every Interval — the load balancer that has not been told yet — while
// polling /ready every PollEvery, and wait for everything to end.
type Seeds struct {
	Dial   DialFunc
	Target string                      // where /work goes: the pod, or the router
	Pod    string                      // the pod itself: /slow and /ready go straight to it
	Stop   func(context.Context) error // delivers the stop once /slow is in flight
	SlowMs int                         // /slow duration; 2000 when zero

	// InFlight is how long /slow runs before the stop, so the server is
	// handling it (not just holding it in its accept queue); 100 ms when zero.
	InFlight                    time.Duration
	Interval, Window, PollEvery time.Duration // 20 ms, 1 s, 50 ms when zero
	Timeout                     time.Duration // per /work and /ready request; 2 s when zero
}

// SeedsResult is the ground truth of one run.
type SeedsResult struct {
	StopAt    time.Time
	Slow      Request
	Work      []Request // sent after the stop
	Readiness []Request
}

func (s *Seeds) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.InFlight, 100*time.Millisecond)
	def(&s.Interval, 20*time.Millisecond)
	def(&s.Window, time.Second)
	def(&s.PollEvery, 50*time.Millisecond)
	def(&s.Timeout, 2*time.Second)
	if s.SlowMs == 0 {
		s.SlowMs = 2000
	}
}

// Run runs the experiment. The /slow request's timeout is its duration plus
// Timeout, so a slow request cut by SIGKILL shows as reset or eof, not timeout.
func (s Seeds) Run(ctx context.Context) (SeedsResult, error) {
	s.defaults()
	var res SeedsResult
	sent := make(chan struct{})
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		slowTimeout := time.Duration(s.SlowMs)*time.Millisecond + s.Timeout
		res.Slow = Get(ctx, s.Dial, s.Pod, fmt.Sprintf("/slow?ms=%d", s.SlowMs), slowTimeout, sent)
	}()
	<-sent
	sleepUntil(ctx, time.Now().Add(s.InFlight))
	res.StopAt = time.Now()
	if err := s.Stop(ctx); err != nil {
		<-slowDone
		return res, fmt.Errorf("delivering the stop: %w", err)
	}
	work := Load{Dial: s.Dial, Target: s.Target, Path: "/work", Interval: s.Interval,
		Count: int(s.Window / s.Interval), Duration: s.Window, Timeout: s.Timeout}
	ready := Load{Dial: s.Dial, Target: s.Pod, Path: "/ready", Interval: s.PollEvery,
		Count: int(s.Window / s.PollEvery), Duration: s.Window, Timeout: s.Timeout}
	var wg sync.WaitGroup
	var werr, rerr error
	wg.Add(2)
	go func() { defer wg.Done(); res.Work, werr = work.Run(ctx) }()
	go func() { defer wg.Done(); res.Readiness, rerr = ready.Run(ctx) }()
	wg.Wait()
	<-slowDone
	if werr != nil {
		return res, werr
	}
	return res, rerr
}

// Timeline prints the run the way the seeds do: readiness transitions, the
// in-flight request, and the counts of requests after the stop.
func (r SeedsResult) Timeline() string {
	var b strings.Builder
	at := func(t time.Time) float64 { return t.Sub(r.StopAt).Seconds() }
	fmt.Fprintf(&b, "%7.2f s  stop delivered\n", 0.0)
	last := Outcome("")
	for _, p := range r.Readiness {
		if p.Outcome != last {
			fmt.Fprintf(&b, "%7.2f s  readiness probe -> %s\n", at(p.Start), p.Outcome)
			last = p.Outcome
		}
	}
	fmt.Fprintf(&b, "%7.2f s  in-flight %s -> %s\n", at(r.Slow.End), r.Slow.Path, r.Slow.Outcome)
	fmt.Fprintf(&b, "  requests after stop: %s (total %d)\n", Summarize(r.Work), len(r.Work))
	return b.String()
}
