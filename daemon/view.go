package daemon

import (
	"sync"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// terminationView is the exporter's thread-safe read side: the correlator
// is owned by the loop goroutine, which publishes a copy of its
// terminations every tick, merged with the complete terminations of the
// store (older than the correlator's retention).
type terminationView struct {
	mu     sync.RWMutex
	live   []correlate.Termination
	stored map[string]correlate.Termination // complete, by pod UID
	// watched are the pods whose network namespace is watched now.
	watched map[string]bool
}

func newTerminationView() *terminationView {
	return &terminationView{stored: make(map[string]correlate.Termination)}
}

// publish replaces the live terminations.
func (v *terminationView) publish(live []correlate.Termination) {
	v.mu.Lock()
	v.live = live
	v.mu.Unlock()
}

// publishWatched replaces the set of pods whose netns is watched.
func (v *terminationView) publishWatched(uids map[string]bool) {
	v.mu.Lock()
	v.watched = uids
	v.mu.Unlock()
}

// isWatched reports whether a pod's network namespace is watched.
func (v *terminationView) isWatched(uid string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.watched[uid]
}

// keep adds complete terminations (restored from the store, or just
// completed).
func (v *terminationView) keep(ts ...correlate.Termination) {
	v.mu.Lock()
	for _, t := range ts {
		v.stored[t.PodUID] = t
	}
	v.mu.Unlock()
}

// prune forgets stored terminations last changed before cutoff.
func (v *terminationView) prune(cutoff time.Time) {
	v.mu.Lock()
	for uid, t := range v.stored {
		if t.Marks.Last().Before(cutoff) {
			delete(v.stored, uid)
		}
	}
	v.mu.Unlock()
}

// Terminations returns every termination known, live ones first.
func (v *terminationView) Terminations() []correlate.Termination {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]correlate.Termination, 0, len(v.live)+len(v.stored))
	seen := make(map[string]bool, len(v.live))
	for _, t := range v.live {
		out = append(out, t)
		seen[t.PodUID] = true
	}
	for uid, t := range v.stored {
		if !seen[uid] {
			out = append(out, t)
		}
	}
	return out
}

// Get returns one pod's termination.
func (v *terminationView) Get(uid string) (correlate.Termination, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, t := range v.live {
		if t.PodUID == uid {
			return t, true
		}
	}
	t, ok := v.stored[uid]
	return t, ok
}
