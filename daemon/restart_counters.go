package daemon

import (
	"slices"

	"github.com/drainwatch/drainwatch/correlate"
)

// A _total series never decreases across restarts on the daemon's own
// state directory. Each checkpoint saves
// the cumulative value of every live series with the terminations completed
// since the previous one, in one transaction: the saved counters hold
// exactly the stored terminations. A restart restores the counters, then
// replays the stored terminations, which the counters already hold (by pod
// UID) and so count nothing; terminations completed after the checkpoint
// (lost by a crash) complete again from the correlator's restored state
// and count once. Series whose TTL expired are not saved, so they stay
// gone. A store without counters (an older drainwatch), or with counters of
// another format version, rebuilds them from the stored terminations: only
// those within the TTL count, as before, so a live series that also counted
// older ones restarts lower. That, and a copy of the state directory older
// than the last run, are the cases docs/metrics.md names where a series falls
// (Prometheus takes it for a counter reset).

// restoreCompleted loads the stored complete terminations into the API view
// and the metrics, after the counters of the last checkpoint.
func (d *Daemon) restoreCompleted(cp Checkpoint, ts []correlate.Termination) {
	if cp.Counters != nil {
		if err := d.metrics.RestoreCounters(*cp.Counters); err != nil {
			d.log.Warn().Err(err).Msg("metric counters not restored: rebuilding them from the stored terminations (series older than the TTL restart lower)")
		}
	}
	slices.SortFunc(ts, byLastMark)
	d.view.keep(ts...)
	d.view.saved()
	for _, t := range ts {
		d.metrics.ObserveTermination(t)
	}
}
