package correlate

import (
	"math"
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// podState is what the correlator keeps about one pod of the node, whether
// it is terminating or not: kernel history that a termination needs from
// before it began (open listeners, recent accepts and refusals) and the
// termination itself once it has begun. Fields are exported for the JSON
// snapshot only.
type podState struct {
	Pod collector.Pod `json:"pod"`
	// Known is set by the first PodUpdate; a pod first learnt from
	// BindNetns/BindCgroup is a placeholder until then.
	Known      bool              `json:"known,omitempty"`
	Seen       time.Time         `json:"seen,omitzero"` // of the latest PodUpdate
	NetnsIno   uint32            `json:"netns,omitempty"`
	Cgroups    map[string]uint64 `json:"cgroups,omitempty"` // container name → cgroup id
	KernelSeen bool              `json:"kernel_seen,omitempty"`

	Listeners  listenerSet `json:"listeners"`
	LastAccept time.Time   `json:"last_accept,omitzero"`
	// The kernel and API streams race: a mark from the API can be processed
	// after kernel events it precedes. Accepts keeps the latest accept
	// times for endpoints_not_ready; Early keeps the latest rare events
	// (refusals, listener closes, exits...) seen while no termination was
	// open, replayed once deletion_seen is known.
	Accepts timeRing  `json:"accepts"`
	Early   eventRing `json:"early"`
	// NotReadySince is when the endpoint last became not ready (zero while
	// it is ready); EverPresent whether the pod was ever in a slice.
	NotReadySince time.Time `json:"not_ready_since,omitzero"`
	EverPresent   bool      `json:"ever_present,omitempty"`
	// Kubelet events that arrived before the termination began.
	Killing        time.Time `json:"killing,omitzero"`
	PrestopFailed  time.Time `json:"prestop_failed,omitzero"`
	PrestopMessage string    `json:"prestop_message,omitempty"`

	Term *termState `json:"term,omitempty"`
}

// termState is a termination in progress with the bookkeeping its counts
// need beyond the Termination record.
type termState struct {
	T Termination `json:"t"`
	// Start is the earliest observation that began the termination.
	Start time.Time `json:"start"`
	// Tentative: begun by a stop signal, no deletion seen yet (SignalLead).
	Tentative   bool `json:"tentative,omitempty"`
	StartedLate bool `json:"started_late,omitempty"`
	// Ran is set when a container was running when the termination began:
	// a pod that never ran has nothing to observe and yields no record.
	Ran bool `json:"ran,omitempty"`
	// Unclassified counts refusals after deletion_seen while no stop signal
	// had been seen.
	Unclassified   int    `json:"unclassified,omitempty"`
	PrestopMessage string `json:"prestop_message,omitempty"`
	// Accepts logs accept times while endpoints_not_ready is unknown.
	Accepts *acceptLog `json:"accepts,omitempty"`
	// AcceptedAfterStop holds cookies accepted after the stop signal, so an
	// in-flight close of any other connection proves it was open at the
	// stop signal. Capped at maxTrackedCookies.
	AcceptedAfterStop map[uint64]bool `json:"accepted_after_stop,omitempty"`
	// Settled holds cookies already counted as killed or reset, so a
	// connection (a multiplexed one too) counts once.
	Settled    map[uint64]bool `json:"settled,omitempty"`
	ExitedPIDs map[uint32]bool `json:"exited_pids,omitempty"`
	InitExited map[string]bool `json:"init_exited,omitempty"` // container name → exited
	// SawInitExit is set by any container init exit, attributed to a
	// container or not.
	SawInitExit bool `json:"saw_init_exit,omitempty"`
}

// maxTrackedCookies bounds the per-termination cookie and PID sets: a busy
// pod that keeps accepting through a long drain must not grow memory (and
// the persisted snapshot) without end. Past it, connections accepted after
// the stop signal are no longer told apart and inflight_at_stop_signal may
// over-count; the exact fix is an accept time on conn_closed_inflight.
const maxTrackedCookies = 8192

// listenerSet tracks the pod's open listening sockets by cookie. Complete
// says every open listener is in Open: false when the daemon may have
// missed a listen_open (it started after the pod's containers, or lost
// events), in which case the last listen_close of the termination stands
// for the listener closing.
type listenerSet struct {
	Open     map[uint64]bool `json:"open,omitempty"`
	Complete bool            `json:"complete,omitempty"`
}

func (l *listenerSet) open(cookie uint64) {
	if l.Open == nil {
		l.Open = make(map[uint64]bool)
	}
	l.Open[cookie] = true
}

// close removes a listener and reports whether it was the last one.
func (l *listenerSet) close(cookie uint64) (last bool) {
	if !l.Open[cookie] {
		l.Complete = false
	}
	delete(l.Open, cookie)
	return l.Complete && len(l.Open) == 0
}

// timeRing keeps the latest ringSize times as Unix nanoseconds.
type timeRing struct {
	T    []int64 `json:"t,omitempty"`
	Next int     `json:"next,omitempty"`
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
	if len(r.T) < ringSize {
		return math.MinInt64
	}
	return r.T[r.Next]
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
}

const earlySize = 32

func (r *eventRing) push(e *collector.Event) {
	if len(r.E) < earlySize {
		r.E = append(r.E, *e)
		return
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

// stopSignalOf is the signal the runtime sends to stop a container.
func stopSignalOf(c collector.Container) uint32 {
	if c.StopSignal != 0 {
		return c.StopSignal
	}
	return sigterm
}

const (
	sigkill = 9
	sigterm = 15
)
