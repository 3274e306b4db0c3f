package daemon

import "time"

// lossUnreadable is the partial reason of the terminations overlapping a
// span in which the kernel's loss counters could not be read: the events
// lost then, if any, are unknown, so those terminations cannot be clean.
const lossUnreadable = "loss_counters_unreadable"

// lossWarnEvery rate-limits the warnings of failing reads: the loop reads
// the counters at every tick (250 ms by default).
const lossWarnEvery = time.Minute

// lossReads is the loop's record of its reads of the kernel's counters.
type lossReads struct {
	// last is the last successful read: every loss gap starts there.
	last    time.Time
	failing bool
	// rebase: the start's read failed, the next good one is the baseline.
	rebase bool
	// failed counts the failed reads since the last warning; warned is
	// that warning's time, and outageWarned says whether the current
	// outage had one (only then is its end logged).
	failed       int
	warned       time.Time
	outageWarned bool
}

// lossUnread opens a gap at the last successful read of the kernel's
// counters, open until a read succeeds again (lossRead closes it): the
// terminations overlapping it are partial.
func (d *Daemon) lossUnread(now time.Time, err error) {
	r := &d.counters.reads
	if !r.failing {
		d.corr.KernelGap(lossUnreadable, r.last, time.Time{})
		d.counters.pace.changed = true
		r.failing = true
	}
	r.failed++
	if !r.warned.IsZero() && now.Sub(r.warned) < lossWarnEvery {
		return
	}
	d.log.Warn().Err(err).Int("failed_reads", r.failed).Time("since", r.last).
		Msg("reading the kernel's loss counters failed: terminations from then until a read succeeds are partial (" + lossUnreadable + ")")
	r.failed, r.warned, r.outageWarned = 0, now, true
}

// lossRead ends at now the gap of failed reads and returns the previous
// successful read. The gap is ended even when this run saw no failure: a
// run that stopped during one leaves it open in its checkpoint.
func (d *Daemon) lossRead(now time.Time) time.Time {
	r := &d.counters.reads
	d.corr.EndGap(lossUnreadable, now)
	if r.failing && r.outageWarned {
		d.log.Info().Int("failed_reads", r.failed).Time("since", r.last).
			Msg("the kernel's loss counters are readable again")
	}
	prev := r.last
	r.last, r.failing, r.failed, r.outageWarned = now, false, 0, false
	return prev
}
