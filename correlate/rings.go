package correlate

import (
	"math"
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Bounded histories that let a mark processed late still classify the
// kernel events it precedes.

// timeRing keeps the latest ringSize times as Unix nanoseconds.
type timeRing struct {
	T    []int64 `json:"t,omitempty"`
	Next int     `json:"next,omitempty"`
	// Floor is the earliest time since which the pushes were every event
	// (a history seeded by the kernel's, which may have wrapped itself).
	Floor int64 `json:"floor,omitempty"`
}

const ringSize = 64

func (r *timeRing) push(t time.Time) {
	if r.T == nil {
		r.T = make([]int64, 0, ringSize)
	}
	if len(r.T) < ringSize {
		r.T = append(r.T, t.UnixNano())
		return
	}
	r.T[r.Next] = t.UnixNano()
	r.Next = (r.Next + 1) % ringSize
}

// oldest is the earliest time since which the ring holds every push: any
// time when it has not wrapped, else its oldest entry.
func (r *timeRing) oldest() int64 {
	floor := r.Floor
	if floor == 0 {
		floor = math.MinInt64
	}
	if len(r.T) < ringSize {
		return floor
	}
	return max(floor, r.T[r.Next])
}

// raiseFloor notes that pushes before from may be missing.
func (r *timeRing) raiseFloor(from int64) {
	if r.Floor == 0 || from > r.Floor {
		r.Floor = from
	}
}

// acceptLog holds the accept times of a termination until
// endpoints_not_ready is known, so the accepts after it can be counted
// however late the API event comes. It starts with the pod's accept ring
// (accepts processed before the termination began) and is dropped once the
// mark is set.
type acceptLog struct {
	T []int64 `json:"t,omitempty"`
	// CompleteFrom is the earliest time since which T holds every accept;
	// Overflow is set when T reached maxTrackedCookies and stopped growing.
	CompleteFrom int64 `json:"complete_from"`
	Overflow     bool  `json:"overflow,omitempty"`
}

func newAcceptLog(r *timeRing) *acceptLog {
	return &acceptLog{T: slices.Clone(r.T), CompleteFrom: r.oldest()}
}

func (l *acceptLog) add(t time.Time) {
	if len(l.T) >= maxTrackedCookies {
		l.Overflow = true
		return
	}
	l.T = append(l.T, t.UnixNano())
}

// countSince counts the accepts at or after from; complete is false when
// some may be missing.
func (l *acceptLog) countSince(from time.Time) (n int, complete bool) {
	f := from.UnixNano()
	for _, t := range l.T {
		if t >= f {
			n++
		}
	}
	return n, !l.Overflow && f >= l.CompleteFrom
}

// eventRing keeps the latest earlySize events.
type eventRing struct {
	E    []collector.Event `json:"e,omitempty"`
	Next int               `json:"next,omitempty"`
	// Overwritten is the time of the newest event the ring had to drop:
	// a termination that begins at or before it may have lost an event.
	Overwritten time.Time `json:"overwritten,omitzero"`
}

const earlySize = 32

func (r *eventRing) push(e *collector.Event) {
	if len(r.E) < earlySize {
		r.E = append(r.E, *e)
		return
	}
	if t := r.E[r.Next].Time; t.After(r.Overwritten) {
		r.Overwritten = t
	}
	r.E[r.Next] = *e
	r.Next = (r.Next + 1) % earlySize
}

// drain returns the kept events oldest first and empties the ring.
func (r *eventRing) drain() []collector.Event {
	es := append(r.E[r.Next:len(r.E):len(r.E)], r.E[:r.Next]...)
	r.E, r.Next = nil, 0
	return es
}
