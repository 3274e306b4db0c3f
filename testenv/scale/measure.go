package scale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/collector/kube"
)

// Result is one design's rollout, measured.
type Result struct {
	Design  Design
	Daemons int
	Rollout time.Duration
	// Incomplete is set when the rollout did not finish within the
	// timeout: the counts cover the rollout up to then.
	Incomplete bool
	Server     ServerCost
	// Start and Rollout are what the daemons received, summed over all of
	// them: while starting (first lists) and during the rollout.
	Start, During ClientCost
	// PeakWatchesPerDaemon is the most watches one daemon held at once.
	PeakWatchesPerDaemon int64
	// Terminations counts the deletions the daemons saw during the rollout,
	// KillingSeen those whose Killing Event reached their daemon before its
	// Event watch ended (taken up to killingWait after the rollout).
	Terminations, KillingSeen uint64
	// KillingAtEnd counts the Killing Events received by the end of the
	// rollout; KillingDelayMedian and Max are the Killing Events' receipt
	// after their time (whole seconds, so up to 1 s too long).
	KillingAtEnd                        uint64
	KillingDelayMedian, KillingDelayMax time.Duration
	// KillingAfterWatchMedian and Max are the Killing Events' receipt
	// after their daemon first saw the pod terminating (its Event watch
	// started then).
	KillingAfterWatchMedian, KillingAfterWatchMax time.Duration
	// MissedUnwatched counts the terminations without a Killing Event
	// whose daemon never saw the pod terminating (only its delete: no
	// Event watch); MissedWatched those whose Event watch ran.
	MissedUnwatched, MissedWatched uint64
}

// ServerCost is the API server's side of a rollout.
type ServerCost struct {
	// IdleWatches are the control plane's own watches (before daemons);
	// PeakWatches the most watches served during the rollout.
	IdleWatches, PeakWatches float64
	// IdleByResource and PeakByResource split the watches by resource
	// (each resource's own peak).
	IdleByResource, PeakByResource map[string]float64
	// Events and Bytes sent on all watch streams during the rollout, by
	// resource (the control plane's own watchers included).
	Events, Bytes map[string]float64
	// CPUSeconds is kube-apiserver's CPU time during the rollout.
	CPUSeconds       float64
	RSSIdle, RSSPeak uint64
}

// ClientCost is what daemons received, summed.
type ClientCost struct {
	Objects   received
	BodyBytes [6]uint64 // by resources index
	WireBytes uint64
	Requests  uint64
	// WatchRequests counts watches opened; PeakWatches is the most open
	// at once over all daemons (sampled every second).
	WatchRequests uint64
	PeakWatches   int64
	// Gzipped counts responses the API server compressed (watch streams
	// too: Go's transport asks for gzip).
	Gzipped uint64
}

const sampleEvery = time.Second

// errNotSettled is a rollout still under way at its timeout.
var errNotSettled = errors.New("rollout not complete")

func (c *cluster) measure(ctx context.Context, d Design) (Result, error) {
	r := Result{Design: d}
	if err := c.deleteEvents(ctx); err != nil {
		return r, err
	}
	idle, err := scrape(ctx, c.admin)
	if err != nil {
		return r, err
	}
	r.Server.IdleWatches, r.Server.IdleByResource = idle.longrunningWatches, idle.watchesByResource
	r.Server.RSSIdle, _ = rssBytes(c.apiPID)
	daemons, stop := []*daemon(nil), func() {}
	if d != None {
		c.cfg.Progress("%s: starting %d daemons", d, len(c.nodes))
		if daemons, stop, err = startDaemons(ctx, d, c.nodes, c.daemonCfg, c.cfg.Log); err != nil {
			return r, err
		}
	}
	defer func() { stop(); c.waitWatchesBelow(ctx, idle.longrunningWatches) }()
	r.Daemons = len(daemons)
	r.Start = clientTotals(daemons)
	before, err := scrape(ctx, c.admin)
	if err != nil {
		return r, err
	}
	cpu0, _ := cpuSeconds(c.apiPID)
	for _, w := range c.workloads {
		if err := w.restart(ctx, c.admin); err != nil {
			return r, err
		}
	}
	sampler := &peaks{pid: c.apiPID, daemons: daemons, byResource: map[string]float64{}}
	if r.Rollout, err = c.waitSettled(ctx, c.cfg.RolloutTimeout, func() { sampler.sample(ctx, c) }); errors.Is(err, errNotSettled) {
		c.cfg.Progress("%s: %v; measured up to now", d, err)
		r.Rollout, r.Incomplete = c.cfg.RolloutTimeout, true
	} else if err != nil {
		return r, err
	}
	cpu1, _ := cpuSeconds(c.apiPID)
	after, err := scrape(ctx, c.admin)
	if err != nil {
		return r, err
	}
	delta := after.minus(before)
	r.Server.Events, r.Server.Bytes, r.Server.CPUSeconds = delta.watchEvents, delta.watchBytes, cpu1-cpu0
	r.Server.PeakWatches, r.Server.PeakByResource, r.Server.RSSPeak = sampler.watches, sampler.byResource, sampler.rss
	r.During = clientTotals(daemons).minus(r.Start)
	r.During.PeakWatches = sampler.clientWatches
	for _, dm := range daemons {
		r.PeakWatchesPerDaemon = max(r.PeakWatchesPerDaemon, dm.wire.watchMax.Load())
	}
	r.KillingAtEnd = r.During.Objects.killingSeen
	r.Terminations, r.KillingSeen = waitKilling(ctx, daemons, r.Start.Objects)
	r.KillingDelayMedian, r.KillingDelayMax, r.KillingAfterWatchMedian, r.KillingAfterWatchMax = killingDelays(daemons)
	for _, d := range daemons {
		if s, ok := d.w.(scoped); ok {
			u, w := s.tally.missed()
			r.MissedUnwatched, r.MissedWatched = r.MissedUnwatched+u, r.MissedWatched+w
		}
	}
	return r, nil
}

// killingDelays returns the median and the longest Killing Event delay
// over all daemons, after the Event's time and after the Event watch began.
func killingDelays(ds []*daemon) (median, longest, watchMedian, watchLongest time.Duration) {
	var all, watch []time.Duration
	for _, d := range ds {
		if s, ok := d.w.(scoped); ok {
			a, w := s.tally.killingDelays()
			all, watch = append(all, a...), append(watch, w...)
		}
	}
	median, longest = medianMax(all)
	watchMedian, watchLongest = medianMax(watch)
	return median, longest, watchMedian, watchLongest
}

func medianMax(d []time.Duration) (median, longest time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)-1]
}

// killingWait bounds the wait for the last terminations' Killing Events:
// a pod's Event watch ends its grace (5 s) plus the linger after its delete.
const killingWait = kube.DefaultLinger + 10*time.Second

// waitKilling returns the terminations seen since start and how many had
// their Killing Event, once every one has it or killingWait has passed.
func waitKilling(ctx context.Context, ds []*daemon, start received) (terminations, killing uint64) {
	deadline := time.Now().Add(killingWait)
	for {
		o := clientTotals(ds).Objects
		terminations, killing = o.terminations-start.terminations, o.killingSeen-start.killingSeen
		if killing == terminations || time.Now().After(deadline) {
			return terminations, killing
		}
		select {
		case <-ctx.Done():
			return terminations, killing
		case <-time.After(sampleEvery):
		}
	}
}

// peaks samples what only has a value now.
type peaks struct {
	pid           int
	daemons       []*daemon
	watches       float64
	byResource    map[string]float64
	rss           uint64
	clientWatches int64
}

func (p *peaks) sample(ctx context.Context, c *cluster) {
	if m, err := scrape(ctx, c.admin); err == nil {
		p.watches = max(p.watches, m.longrunningWatches)
		for r, n := range m.watchesByResource {
			p.byResource[r] = max(p.byResource[r], n)
		}
	}
	if rss, err := rssBytes(p.pid); err == nil {
		p.rss = max(p.rss, rss)
	}
	var open int64
	for _, d := range p.daemons {
		open += d.wire.watches.Load()
	}
	p.clientWatches = max(p.clientWatches, open)
}

func clientTotals(ds []*daemon) ClientCost {
	var t ClientCost
	for _, d := range ds {
		o := d.w.received()
		t.Objects.pods += o.pods
		t.Objects.services += o.services
		t.Objects.slices += o.slices
		t.Objects.events += o.events
		t.Objects.sliceWatches += o.sliceWatches
		t.Objects.terminations += o.terminations
		t.Objects.killingSeen += o.killingSeen
		for i := range t.BodyBytes {
			t.BodyBytes[i] += d.wire.bodyBytes[i].Load()
		}
		t.WireBytes += d.wire.wireBytes.Load()
		t.Requests += d.wire.requests.Load()
		t.WatchRequests += d.wire.watchesOp.Load()
		t.Gzipped += d.wire.gzipped.Load()
	}
	return t
}

func (a ClientCost) minus(b ClientCost) ClientCost {
	d := ClientCost{
		Objects: received{pods: a.Objects.pods - b.Objects.pods, services: a.Objects.services - b.Objects.services,
			slices: a.Objects.slices - b.Objects.slices, events: a.Objects.events - b.Objects.events,
			sliceWatches: a.Objects.sliceWatches - b.Objects.sliceWatches,
			terminations: a.Objects.terminations - b.Objects.terminations, killingSeen: a.Objects.killingSeen - b.Objects.killingSeen},
		WireBytes: a.WireBytes - b.WireBytes, Requests: a.Requests - b.Requests, WatchRequests: a.WatchRequests - b.WatchRequests,
		Gzipped: a.Gzipped - b.Gzipped,
	}
	for i := range d.BodyBytes {
		d.BodyBytes[i] = a.BodyBytes[i] - b.BodyBytes[i]
	}
	return d
}

// waitSettled waits until every Deployment has rolled out and no old pod
// is left, calling sample every second; it returns how long that took.
func (c *cluster) waitSettled(ctx context.Context, within time.Duration, sample func()) (time.Duration, error) {
	start := time.Now()
	for {
		if sample != nil {
			sample()
		}
		done, err := c.settled(ctx)
		if err != nil {
			return 0, err
		}
		if done {
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			return 0, fmt.Errorf("%w within %s (%d pods exist, %d wanted)", errNotSettled, within, len(c.kubelet.inf.GetStore().ListKeys()), c.pods)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(sampleEvery):
		}
	}
}

// settled: every Deployment complete and exactly the wanted pods exist
// (the hollow kubelet's cache holds every pod).
func (c *cluster) settled(ctx context.Context) (bool, error) {
	if len(c.kubelet.inf.GetStore().ListKeys()) != c.pods {
		return false, nil
	}
	for _, w := range c.workloads {
		if ok, err := w.settled(ctx, c.admin); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// waitWatchesBelow waits (at most a minute) until the stopped daemons'
// watches have ended, so the next design starts from the same idle state.
func (c *cluster) waitWatchesBelow(ctx context.Context, idle float64) {
	for range 60 {
		if m, err := scrape(ctx, c.admin); err != nil || m.longrunningWatches <= idle {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	c.cfg.Log.Warn().Float64("idle", idle).Msg("daemons' watches still open a minute after they stopped")
}
