package daemon

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/correlate"
)

// What a restart keeps, and what it can lose.
//
// The store keeps the correlator's state; with Config.PinPath the kernel
// side keeps collecting into the pinned ring buffer while the daemon is
// down, and the next run's reader continues at the kernel's consumer
// position. An orderly shutdown (SIGTERM) stops the reader, counts every
// event it had read and saves a clean checkpoint: the next run, resumed,
// neither misses nor repeats an event, and reports no gap.
//
// A daemon killed without its final checkpoint (SIGKILL, OOM, a node
// crash) loses what it read from the ring buffer after its last periodic
// checkpoint (at most CheckpointEvery): the kernel's consumer position has
// moved past those events, and the saved state does not count them. The
// next run then reports a daemon_down gap from the last event it saved, so
// the terminations overlapping it are partial, never silently short.
// Events the ring buffer could not hold while the daemon was down (2 MiB
// by default, about 14,500 events) are counted by the kernel and reported as an
// events_lost gap.

// kernelOptions are the options of this run's kernel side: resume the
// pinned programs only when the store has state that continues them.
func (d *Daemon) kernelOptions(restored bool) kernel.Options {
	o := kernel.Options{Logger: d.log.With().Str("component", "kernel").Logger(), NoResume: !restored,
		RingBufferSize: d.cfg.RingBufferSize}
	o.MessageProbes, _ = messageProbesMode(d.cfg.HTTP2Tracking) // checked by withDefaults
	if d.cfg.PinPath != "" {
		o.PinPath = NodePinPath(d.cfg.PinPath, d.cfg.NodeName)
	}
	return o
}

// NodePinPath is the node's pin directory under a pin path: keyed by node
// so that test hosts running a daemon per simulated node never share a ring
// buffer (bpffs reserves dots in names).
func NodePinPath(pinPath, node string) string {
	return filepath.Join(pinPath, strings.ReplaceAll(node, ".", "_"))
}

// restore loads the previous run's correlator state and scopes, and
// reports the time the daemon was down as a kernel gap unless the kernel
// side kept collecting and the previous run saved everything it read.
func (d *Daemon) restore(cp Checkpoint) error {
	resumed := kernelResumed(d.kernel)
	state := cp.Correlator
	if resumed {
		// The pinned ring buffer delivers each event once (its consumer
		// position is the kernel's): nothing counted before comes again.
		// The replay filter could only drop a real event, one stamped a
		// few nanoseconds before the last counted one by another CPU
		// (the timestamp is taken after the ring-buffer reservation).
		state.KernelWatermark = correlate.Watermark{}
	}
	if err := d.corr.Restore(state); err != nil {
		return fmt.Errorf("restoring correlator state: %w", err)
	}
	d.relist.restored(cp.Correlator)
	now := d.cfg.Now()
	d.scopes.Restore(cp.Scopes, now)
	for _, r := range cp.Scopes {
		if _, live := d.corr.Get(r.PodUID); live {
			d.scopes.Terminating(r.PodUID) // records on again (fresh maps), history once
		}
	}
	from := downSince(cp)
	if !resumed || !cp.Clean {
		d.corr.KernelGap("daemon_down", from, now)
	}
	d.log.Info().Time("down_since", from).Dur("down_for", now.Sub(from)).Int("scopes", len(cp.Scopes)).
		Bool("kernel_resumed", resumed).Bool("clean_shutdown", cp.Clean).Msg("restored state of the previous run")
	return nil
}

// downSince is the start of what a restart may have missed: everything up
// to the kernel watermark was counted and saved; later events may have
// been read without being saved.
func downSince(cp Checkpoint) time.Time {
	return later(cp.Correlator.KernelWatermark.At, cp.Alive.Add(-time.Second))
}

// kernelResumed says whether the kernel side kept collecting while the
// daemon was down (pinned BPF objects reopened).
func kernelResumed(k Kernel) bool {
	r, ok := k.(interface{ Resumed() bool })
	return ok && r.Resumed()
}

// baselineLost starts counting lost events from now. A resumed kernel side
// counts the losses of every run since its programs were loaded: those
// beyond the last checkpoint's happened while the daemon was down (the ring
// buffer filled), a gap over the downtime.
//
// When the counters cannot be read, the first read that succeeds is the
// baseline, and what was lost before it is unknown: a loss_counters_unreadable
// gap from the last saved moment (or from now, on a first start).
func (d *Daemon) baselineLost(cp Checkpoint, restored bool) {
	st, err := d.kernel.Stats()
	if err != nil {
		d.counters.reads.last, d.counters.reads.rebase = d.cfg.Now(), true
		if restored {
			// The next checkpoint keeps the previous run's count until
			// a read gives this run's.
			d.counters.reads.last, d.counters.lostInKernel = downSince(cp), cp.KernelLost
		}
		d.lossUnread(d.cfg.Now(), err)
		return
	}
	d.baseline(st)
	if !restored || !kernelResumed(d.kernel) || st.LostInKernel <= cp.KernelLost {
		return
	}
	n, now := st.LostInKernel-cp.KernelLost, d.cfg.Now()
	d.metrics.AddKernelEventsLost(n)
	d.corr.KernelGap("events_lost", downSince(cp), now)
	d.log.Warn().Uint64("lost", n).Msg("the ring buffer overflowed while drainwatch was down: overlapping terminations are partial")
}

// baseline counts the kernel's losses from st on.
func (d *Daemon) baseline(st kernel.Stats) {
	d.counters.lost, d.counters.lostInKernel = st.Lost(), st.LostInKernel
	// The connection map's overflow counter is pinned with it and counts
	// every run: only increases from now on open a conn_tracking_full gap
	// (the checkpoint does not say which were during the downtime).
	d.counters.untracked = st.Untracked
	d.counters.evicted = st.Evicted
	d.counters.reads.rebase = false
}

// closeKernel stops the kernel side, first removing its pins when asked
// (the programs then detach at Close instead of collecting on).
func (d *Daemon) closeKernel() error {
	if u, ok := d.kernel.(interface{ Unpin() error }); ok && d.cfg.UnpinOnExit {
		if err := u.Unpin(); err != nil {
			d.log.Error().Err(err).Msg("removing the BPF pins")
		}
	}
	return d.kernel.Close()
}
