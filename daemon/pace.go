package daemon

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector/node"
)

// A quiet node (pods running, none terminating, no connection to a
// terminating pod) gives the loop nothing to do, and its periodic work
// should cost accordingly: pace keeps the tick and the checkpoints at
// their configured periods while something happens and slows them down
// while nothing does.
const (
	// idleTicks is how many TickEvery an idle tick waits: the tick's
	// work (completing terminations, binding scopes, accounting lost
	// events) has no input to act on meanwhile. It stays far below
	// StuckTicks.
	idleTicks = 4
	// idleAfter is how long after the last API or kernel event the loop
	// counts as busy: as long as node.Scopes paces its cgroup rescans
	// for recently updated pods, whose containers may appear without a
	// further API update.
	idleAfter = 30 * time.Second
	// checkpointIdleEvery is how often an unchanged state is saved anyway:
	// the "alive" stamp that starts the gap a crash leaves, and what the
	// correlator's Tick changes by itself (tentative terminations dropped,
	// completed ones expired: functions of time over the saved state,
	// which a restored daemon recomputes).
	checkpointIdleEvery = 30 * time.Second
)

// pace is the loop's record of what happened since its last tick and its
// last checkpoint.
type pace struct {
	lastInput time.Time // last API or kernel event
	changed   bool      // some input or tick result since the last checkpoint
	saved     time.Time // last checkpoint written
	scopesKey string    // the watched scopes at that checkpoint
	pruned    time.Time // last time the store was pruned
}

// pruneEvery paces the store's pruning. Pruning reads the last mark of
// every stored termination (all of them, up to --keep-completed: a week by
// default); doing it at every checkpoint (2 s) would make a node that has
// seen many terminations read its whole store every 2 s. Retention in
// minutes is precise enough.
const pruneEvery = time.Minute

// pruneDue says whether the store is to be pruned at a checkpoint at now,
// and notes it if so; an orderly shutdown's checkpoint always prunes.
func (p *pace) pruneDue(now time.Time, clean bool) bool {
	if !clean && !p.pruned.IsZero() && now.Sub(p.pruned) < pruneEvery {
		return false
	}
	p.pruned = now
	return true
}

// input notes an API or kernel event.
func (p *pace) input(now time.Time) {
	p.lastInput, p.changed = now, true
}

// nextTick is how long the loop waits for its next tick.
func (p *pace) nextTick(now time.Time, every time.Duration, live int) time.Duration {
	if live > 0 || now.Sub(p.lastInput) < idleAfter {
		return every
	}
	return idleTicks * every
}

// checkpointDue says whether a periodic checkpoint would save something
// new: an input or a finished termination since the last one, watched
// scopes bound or released by a tick, or checkpointIdleEvery elapsed.
func (p *pace) checkpointDue(now time.Time, scopes []node.ScopeRecord) bool {
	return p.changed || now.Sub(p.saved) >= checkpointIdleEvery || scopesKey(scopes) != p.scopesKey
}

// checkpointed notes a checkpoint written at now with these scopes.
func (p *pace) checkpointed(now time.Time, scopes []node.ScopeRecord) {
	p.changed, p.saved, p.scopesKey = false, now, scopesKey(scopes)
}

// scopesKey is a canonical text of the watched scopes (Records comes in
// map order), cheap to compare.
func scopesKey(recs []node.ScopeRecord) string {
	lines := make([]string, 0, len(recs))
	for _, r := range recs {
		var b strings.Builder
		b.WriteString(r.PodUID)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatUint(uint64(r.Netns), 10))
		names := make([]string, 0, len(r.Cgroups))
		for name := range r.Cgroups {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			b.WriteByte(' ')
			b.WriteString(name)
			b.WriteByte('=')
			b.WriteString(strconv.FormatUint(r.Cgroups[name], 10))
		}
		lines = append(lines, b.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
