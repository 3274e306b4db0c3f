package daemon

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// completedReader is the store as the view reads it: the complete
// terminations no longer held in memory.
type completedReader interface {
	Termination(uid string) (correlate.Termination, bool, error)
	EachCompleted(skip func(key []byte) bool, fn func(correlate.Termination) error) error
}

// terminationView is the exporter's thread-safe read side: the correlator
// is owned by the loop goroutine, which publishes a copy of its
// terminations in progress every tick. Complete terminations stay in
// memory up to a bound (the most recent, what the UI and `timeline
// --follow` ask for); older ones are read from the store, so memory does
// not grow with the number of terminations a node has seen.
type terminationView struct {
	mu   sync.RWMutex
	live []correlate.Termination
	// recent are complete terminations by pod UID; order lists them oldest
	// first. Beyond bound, the oldest already saved in older leave memory.
	recent map[string]correlate.Termination
	order  []string
	bound  int
	older  completedReader // nil: none (before the store is open)
	log    zerolog.Logger
	// watched are the pods whose network namespace is watched now.
	watched map[string]bool
}

func newTerminationView(bound int, log zerolog.Logger) *terminationView {
	return &terminationView{recent: make(map[string]correlate.Termination), bound: bound, log: log}
}

// readOlder makes the view serve the complete terminations it evicted
// from r.
func (v *terminationView) readOlder(r completedReader) {
	v.mu.Lock()
	v.older = r
	v.mu.Unlock()
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
// completed). They stay in memory at least until the next saved call: a
// termination not yet in the store must not vanish from the API.
func (v *terminationView) keep(ts ...correlate.Termination) {
	v.mu.Lock()
	for _, t := range ts {
		if _, ok := v.recent[t.Key()]; !ok {
			v.order = append(v.order, t.Key())
		}
		v.recent[t.Key()] = t
	}
	v.mu.Unlock()
}

// saved says that every termination kept so far is in the store: the
// oldest beyond the bound leave memory.
func (v *terminationView) saved() {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := len(v.order) - v.bound
	if n <= 0 || v.older == nil {
		return
	}
	for _, uid := range v.order[:n] {
		delete(v.recent, uid)
	}
	v.order = slices.Clone(v.order[n:])
}

// prune forgets kept terminations last changed before cutoff (the store
// prunes its own).
func (v *terminationView) prune(cutoff time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.order = slices.DeleteFunc(v.order, func(uid string) bool {
		if v.recent[uid].Marks.Last().Before(cutoff) {
			delete(v.recent, uid)
			return true
		}
		return false
	})
}

// Terminations returns every termination known, live ones first.
func (v *terminationView) Terminations() []correlate.Termination {
	var all []correlate.Termination
	v.EachMatching(exporter.Filter{}, func(t correlate.Termination) { all = append(all, t) })
	return all
}

// EachMatching calls fn with each termination f selects, live ones first,
// then the recent ones, then the store's, read one at a time so that only
// what fn keeps is held (and without the lock: a long read must not stall
// the loop's publish).
func (v *terminationView) EachMatching(f exporter.Filter, fn func(correlate.Termination)) {
	v.mu.RLock()
	seen := make(map[string]bool, len(v.live)+len(v.order))
	for _, t := range v.live {
		seen[t.Key()] = true
		if f.Match(t) {
			fn(t)
		}
	}
	for _, key := range v.order {
		if t := v.recent[key]; !seen[key] && f.Match(t) {
			fn(t)
		}
		seen[key] = true
	}
	older := v.older
	v.mu.RUnlock()
	if older == nil {
		return
	}
	// What the view holds is skipped by its key (the store's keys are
	// Termination.Key), before it is decoded.
	held := func(key []byte) bool { return seen[string(key)] }
	err := older.EachCompleted(held, func(t correlate.Termination) error {
		if f.Match(t) {
			fn(t)
		}
		return nil
	})
	if err != nil {
		v.log.Error().Err(err).Msg("reading older terminations from the store: the API lists only the recent ones")
	}
}

// Get returns one pod's termination (the pod's own once complete; its
// containers' are in Terminations).
func (v *terminationView) Get(uid string) (correlate.Termination, bool) {
	v.mu.RLock()
	for _, t := range v.live {
		if t.PodUID == uid {
			v.mu.RUnlock()
			return t, true
		}
	}
	t, ok := v.recent[uid]
	older := v.older
	v.mu.RUnlock()
	if ok || older == nil {
		return t, ok
	}
	t, ok, err := older.Termination(uid)
	if err != nil {
		v.log.Error().Err(err).Str("pod_uid", uid).Msg("reading a termination from the store")
	}
	return t, ok
}

// byLastMark orders restored terminations as they completed, so the
// oldest leave memory first.
func byLastMark(a, b correlate.Termination) int {
	return cmp.Or(a.Marks.Last().Compare(b.Marks.Last()), cmp.Compare(a.Key(), b.Key()))
}
