package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// loopCounters are the loop's own bookkeeping between ticks.
type loopCounters struct {
	lastTick     time.Time
	reads        lossReads
	lost         uint64
	lostInKernel uint64 // Stats.LostInKernel as of lost
	untracked    uint64
	evicted      map[string]uint64
	unattributed map[collector.EventType]uint64
	pace         pace
}

// loop is the only goroutine touching the correlator: API events, kernel
// events, ticks and checkpoints, until ctx is done or a component fails.
func (d *Daemon) loop(ctx context.Context, kubeErr, srvErr <-chan error) error {
	tick := time.NewTimer(d.cfg.TickEvery)
	defer tick.Stop()
	save := time.NewTicker(d.cfg.CheckpointEvery)
	defer save.Stop()
	events := d.kernel.Events()
	d.counters.lastTick = d.cfg.Now()
	d.counters.reads.last = d.counters.lastTick
	d.counters.pace.input(d.counters.lastTick) // the start is busy
	d.beat.Store(d.counters.lastTick.UnixNano())
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-kubeErr:
			if err != nil {
				return err
			}
			kubeErr = nil
		case err := <-srvErr:
			return err
		case ev := <-d.api:
			d.handleAPI(ev)
			d.counters.pace.input(d.cfg.Now())
		case e, ok := <-events:
			if !ok {
				return fmt.Errorf("kernel event stream closed unexpectedly")
			}
			d.metrics.CountKernelEvent(e.Type)
			d.corr.Kernel(e)
			d.counters.pace.input(d.cfg.Now())
		case <-tick.C:
			now := d.cfg.Now()
			live := d.tick(now)
			tick.Reset(d.counters.pace.nextTick(now, d.cfg.TickEvery, live))
		case <-save.C:
			d.periodicCheckpoint()
		}
	}
}

func (d *Daemon) handleAPI(ev apiEvent) {
	switch {
	case ev.listed:
		d.podsGoneWhileDown()
	case ev.pod != nil:
		d.relist.seen(ev.pod.Pod.UID)
		if !ev.pod.Pod.DeletionTimestamp.IsZero() {
			// Before the correlator begins the termination: the accepts
			// the kernel held until now are its history.
			d.scopes.Terminating(ev.pod.Pod.UID)
		}
		d.corr.Pod(*ev.pod)
		d.scopes.PodUpdate(ev.pod.Pod, d.cfg.Now())
		if d.corr.StartupStarting(ev.pod.Pod.UID) {
			// The first accepted connection needs a record per accept.
			d.scopes.Starting(ev.pod.Pod.UID)
		}
		d.followHTTP2(d.http2.podUpdate(ev.pod.Pod))
	case ev.deleted != nil:
		d.scopes.Terminating(ev.deleted.UID)
		d.corr.PodDeleted(*ev.deleted)
		d.scopes.PodDeleted(ev.deleted.UID, ev.deleted.Seen)
		d.followHTTP2(d.http2.podDeleted(ev.deleted.UID))
	case ev.kubelet != nil:
		d.corr.Kubelet(*ev.kubelet)
	case ev.endpoint != nil:
		d.corr.Endpoint(*ev.endpoint)
	case ev.node != nil:
		d.corr.Node(*ev.node)
	}
}

// tick completes terminations, binds new scopes, accounts lost kernel
// events and publishes the API view. It returns the number of terminations
// in progress.
func (d *Daemon) tick(now time.Time) int {
	d.accountLost(now)
	d.relist.poll(d.kube.Load(), d.sink)
	for _, t := range d.corr.Tick(now) {
		d.finished(t)
	}
	starting := d.startupsTick(now)
	d.steadyReuse()
	d.scopes.Sync(now, false)
	d.accountUnattributed()
	live := d.corr.Terminations()
	d.view.publish(live)
	d.view.publishWatched(d.scopes.WatchedPods())
	d.metrics.Expire(append(exporter.PendingWorkloads(live), startupWorkloads(starting)...))
	d.counters.lastTick = now
	d.beat.Store(now.UnixNano())
	return len(live)
}

// finished logs, counts and keeps one complete termination.
func (d *Daemon) finished(t correlate.Termination) {
	logTermination(d.log, t)
	d.metrics.ObserveTermination(t)
	if d.events != nil {
		d.events.Report(t)
	}
	d.view.keep(t)
	d.completed = append(d.completed, t)
	d.counters.pace.changed = true
	if t.Container == "" {
		// A container's termination leaves its pod running, watched.
		d.scopes.Release(t.PodUID)
	}
}

// steadyReuse moves the requests reset on reused connections of pods that
// were not terminating from the correlator to the workloads' counters (the
// next checkpoint saves both sides at once) and logs each workload's.
func (d *Daemon) steadyReuse() {
	counts := d.corr.TakeSteadyReuseResets()
	if len(counts) == 0 {
		return
	}
	d.metrics.AddSteadyReuseResets(counts)
	for _, wc := range counts {
		d.log.Info().Str("namespace", wc.Workload.Namespace).Str("workload_kind", wc.Workload.Kind).
			Str("workload", wc.Workload.Name).Int("requests_reset_on_reused_connections", wc.N).
			Msg("requests reset on reused keep-alive connections outside terminations: the server's idle timeout is shorter than an upstream pool's")
	}
}

// accountLost turns kernel events lost since the last successful read of
// the kernel's counters into a gap: the terminations overlapping it are
// partial. A failed read is a gap as well (lossUnread): what it would have
// said is unknown, and the next successful read counts what it missed.
func (d *Daemon) accountLost(now time.Time) {
	st, err := d.kernel.Stats()
	if err != nil {
		d.lossUnread(now, err)
		return
	}
	from := d.lossRead(now)
	if d.counters.reads.rebase {
		d.baseline(st)
		return
	}
	d.counters.lostInKernel = st.LostInKernel
	if lost := st.Lost(); lost > d.counters.lost {
		d.metrics.AddKernelEventsLost(lost - d.counters.lost)
		d.corr.KernelGap("events_lost", from, now)
		d.counters.pace.changed = true
		d.log.Warn().Uint64("lost", lost-d.counters.lost).Msg("kernel events lost: overlapping terminations are partial")
		d.counters.lost = lost
	}
	if st.Untracked > d.counters.untracked {
		d.metrics.AddConnectionsUntracked(st.Untracked - d.counters.untracked)
		d.corr.KernelGap("conn_tracking_full", from, now)
		d.counters.pace.changed = true
		d.log.Warn().Uint64("untracked", st.Untracked-d.counters.untracked).
			Msg("the kernel's connection map is full: connections accepted now are not tracked, overlapping terminations are partial")
		d.counters.untracked = st.Untracked
	}
	d.accountEvictions(st.Evicted)
}

// accountEvictions counts the entries the kernel's LRU maps forgot since
// the last tick (the pinned counters count every run: the first reading
// after a start is the baseline, see baselineLost).
func (d *Daemon) accountEvictions(evicted map[string]uint64) {
	if d.counters.evicted == nil {
		d.counters.evicted = map[string]uint64{}
	}
	for name, n := range evicted {
		if prev := d.counters.evicted[name]; n > prev {
			d.metrics.AddMapEvictions(name, n-prev)
			d.log.Warn().Str("map", name).Uint64("evicted", n-prev).
				Msg("a kernel LRU map is full and forgot entries to make room")
			d.counters.evicted[name] = n
		}
	}
}

func (d *Daemon) accountUnattributed() {
	now := d.corr.Unattributed()
	if d.counters.unattributed == nil {
		d.counters.unattributed = map[collector.EventType]uint64{}
	}
	for t, n := range now {
		for i := d.counters.unattributed[t]; i < n; i++ {
			d.metrics.CountUnattributed(t)
		}
		d.counters.unattributed[t] = n
	}
}

// checkpoint saves the correlator, the scopes, the metrics' counters and
// the terminations completed since the last checkpoint (counted into those
// counters), and prunes old ones; clean marks the final checkpoint of an
// orderly shutdown.
func (d *Daemon) checkpoint(clean bool) error {
	state, err := d.corr.Snapshot()
	if err != nil {
		return err
	}
	now := d.cfg.Now()
	counters := d.metrics.Counters()
	scopes := d.scopes.Records()
	// KernelLost is the kernel's count the saved counters include: a read
	// now could add losses they do not (or fail and save 0).
	cp := Checkpoint{Correlator: state, Scopes: scopes, Alive: now, Clean: clean, Counters: &counters,
		KernelLost: d.counters.lostInKernel, Startups: d.startupsDone, Export: d.otlp != nil}
	if err := d.store.SaveCheckpoint(cp, d.completed); err != nil {
		return err
	}
	if d.otlp != nil && len(d.completed)+len(d.startupsDone) > 0 {
		d.otlp.Notify()
	}
	d.completed, d.startupsDone = nil, nil
	d.view.saved()
	d.counters.pace.checkpointed(now, scopes)
	if !d.counters.pace.pruneDue(now, clean) {
		return nil
	}
	cutoff := now.Add(-d.cfg.KeepCompleted)
	d.view.prune(cutoff)
	_, err = d.store.Prune(cutoff, correlate.Marks.Last)
	_, serr := d.store.PruneStartups(cutoff)
	return errors.Join(err, serr)
}

// periodicCheckpoint saves a checkpoint when the state may have changed
// (see pace.checkpointDue); a failure (a full disk) is logged and counted,
// and the loop counts on: the terminations not saved stay in memory for
// the next checkpoint.
func (d *Daemon) periodicCheckpoint() {
	if !d.counters.pace.checkpointDue(d.cfg.Now(), d.scopes.Records()) {
		return
	}
	if err := d.checkpoint(false); err != nil {
		d.state.failures.Inc()
		d.log.Error().Err(err).Str("state_dir", d.cfg.StateDir).
			Msg("checkpoint failed (counting goes on; is the state dir's disk full?): a restart now would lose recent terminations")
	}
}

// drainKernel feeds the events the reader delivered before Close.
func (d *Daemon) drainKernel() {
	for e := range d.kernel.Events() {
		d.metrics.CountKernelEvent(e.Type)
		d.corr.Kernel(e)
	}
}
