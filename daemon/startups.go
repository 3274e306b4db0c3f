package daemon

import (
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// keptStartups bounds the complete startups the daemon serves and stores:
// the most recent (saved with each checkpoint, in step with the metrics'
// counters they were counted into, and read back at start).
const keptStartups = 1024

// startupView is the HTTP side's copy of the startups: those in progress,
// published each tick, and the most recent complete ones.
type startupView struct {
	mu   sync.RWMutex
	live []correlate.Startup
	done []correlate.Startup // oldest first, at most keptStartups
}

func (v *startupView) publish(live []correlate.Startup) {
	v.mu.Lock()
	v.live = live
	v.mu.Unlock()
}

func (v *startupView) keep(s correlate.Startup) {
	v.mu.Lock()
	if len(v.done) == keptStartups {
		v.done = slices.Delete(v.done, 0, 1)
	}
	v.done = append(v.done, s)
	v.mu.Unlock()
}

// restore puts the stored startups (oldest first) back, before the loop.
func (v *startupView) restore(ss []correlate.Startup) {
	v.mu.Lock()
	v.done = slices.Clone(ss[max(len(ss)-keptStartups, 0):])
	v.mu.Unlock()
}

// Startups returns the complete startups, oldest first, then those in
// progress.
func (v *startupView) Startups() []correlate.Startup {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return append(slices.Clip(v.done), v.live...)
}

// Startups reads the daemon's startups (safe for concurrent use): what
// /api/v1/startups serves.
func (d *Daemon) Startups() []correlate.Startup { return d.startups.Startups() }

// startupsTick completes the startups whose window ended and publishes
// and returns those in progress.
func (d *Daemon) startupsTick(now time.Time) []correlate.Startup {
	for _, s := range d.corr.TakeStartups(now) {
		logStartup(d.log, s)
		d.metrics.ObserveStartup(s)
		d.startups.keep(s)
		if d.events != nil {
			d.events.ReportStartup(s)
		}
		// Bounded like the view: checkpoints that keep failing (a full
		// disk) lose the oldest unsaved records, never memory.
		if len(d.startupsDone) == keptStartups {
			d.startupsDone = slices.Delete(d.startupsDone, 0, 1)
		}
		d.startupsDone = append(d.startupsDone, s)
		d.scopes.Started(s.PodUID)
		d.counters.pace.changed = true
	}
	live := d.corr.Startups()
	d.startups.publish(live)
	return live
}

// logStartup writes the one info line of a complete startup.
func logStartup(log zerolog.Logger, s correlate.Startup) {
	codes := make([]string, 0, len(s.Diagnoses))
	for _, dg := range s.Diagnoses {
		codes = append(codes, dg.Code)
	}
	ev := log.Info().
		Str("namespace", s.Workload.Namespace).Str("pod", s.Pod).Str("pod_uid", s.PodUID).
		Str("workload_kind", s.Workload.Kind).Str("workload", s.Workload.Name).Str("revision", s.Workload.Revision).
		Int("refused_before_ready", s.Counts.RefusedBeforeReady).
		Int("refused_after_ready", s.Counts.RefusedAfterReady).
		Int("reset_after_ready", s.Counts.ResetAfterReady).
		Int("probe_refused", s.Counts.ProbeRefused).
		Strs("diagnoses", codes)
	if !s.Marks.FirstAccept.IsZero() && !s.Marks.Ready.IsZero() {
		ev = ev.Str("ready_to_first_accept", correlate.FormatSecondsMs(s.ReadyToFirstAccept))
	}
	if len(s.Diagnoses) > 0 {
		ev = ev.Str("diagnosis", s.Diagnoses[0].Message).Str("fix", s.Diagnoses[0].Fix)
	}
	if s.Partial {
		ev = ev.Strs("partial_reasons", s.PartialReasons)
	}
	ev.Msg("startup complete")
}

// startupWorkloads are the revisions of startups in progress: their
// series exist (at zero) and do not expire meanwhile.
func startupWorkloads(ss []correlate.Startup) []collector.Workload {
	out := make([]collector.Workload, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Workload)
	}
	return out
}
