package correlate

import (
	"slices"
	"time"
)

// MarkDef is one mark of the timeline: its name in docs/design.md and where Marks
// keeps it.
type MarkDef struct {
	Name string
	Of   func(m *Marks) *time.Time
	// Begins says the mark can begin a termination (the API's deletion,
	// the kubelet's Killing, the stop signal, the pod gone, and a SIGKILL
	// or an exit nobody announced: the OOM killer, a crash): a
	// termination's Start is the earliest of these.
	Begins bool
}

// MarkDefs lists every mark in the order of docs/design.md, the causal one:
// the API, the exporter's timeline and the daemon's pruning all read the
// marks through it.
var MarkDefs = []MarkDef{
	{"delete_requested", func(m *Marks) *time.Time { return &m.DeleteRequested }, true},
	{"deletion_seen", func(m *Marks) *time.Time { return &m.DeletionSeen }, true},
	{"killing", func(m *Marks) *time.Time { return &m.Killing }, true},
	{"prestop_failed", func(m *Marks) *time.Time { return &m.PrestopFailed }, false},
	{"stop_signal", func(m *Marks) *time.Time { return &m.StopSignal }, true},
	{"endpoints_not_ready", func(m *Marks) *time.Time { return &m.EndpointsNotReady }, false},
	{"listener_closed", func(m *Marks) *time.Time { return &m.ListenerClosed }, false},
	{"last_accept", func(m *Marks) *time.Time { return &m.LastAccept }, false},
	{"sigkill", func(m *Marks) *time.Time { return &m.Sigkill }, true},
	{"exit", func(m *Marks) *time.Time { return &m.Exit }, true},
	{"pod_gone", func(m *Marks) *time.Time { return &m.PodGone }, true},
}

// Mark is one named, observed mark of a timeline.
type Mark struct {
	Name string
	Time time.Time
}

// Observed returns the observed marks in time order (ties keep the
// MarkDefs order, that of docs/design.md).
func (m Marks) Observed() []Mark {
	out := make([]Mark, 0, len(MarkDefs))
	for i, at := range m.times() {
		if !at.IsZero() {
			out = append(out, Mark{MarkDefs[i].Name, at})
		}
	}
	slices.SortStableFunc(out, func(a, b Mark) int { return a.Time.Compare(b.Time) })
	return out
}

// First is the earliest observed mark of any kind, zero when none is: the
// origin of a timeline without a stop signal.
func (m Marks) First() time.Time { return m.earliest(func(MarkDef) bool { return true }) }

// Last is the latest observed mark: how old a termination is, for the
// API's since filter, the metrics' TTL and the daemon's pruning.
func (m Marks) Last() time.Time {
	var last time.Time
	for _, at := range m.times() {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// times returns the marks in MarkDefs order. Last, Start and Observed read
// them through it rather than through MarkDef.Of: a call through a func
// value makes its argument escape, which cost a heap copy of the Marks per
// call, for every termination the API lists and the store prunes
// (TestMarkTimesInMarkDefsOrder holds the two in step).
func (m *Marks) times() [11]time.Time {
	return [...]time.Time{m.DeleteRequested, m.DeletionSeen, m.Killing, m.PrestopFailed, m.StopSignal,
		m.EndpointsNotReady, m.ListenerClosed, m.LastAccept, m.Sigkill, m.Exit, m.PodGone}
}

// Key identifies a termination among a node's: the pod's UID for the
// pod's own; for a container's, with the container and the start (a pod
// restarts its containers many times, each a termination).
func (t Termination) Key() string {
	if t.Container == "" {
		return t.PodUID
	}
	return t.PodUID + "/" + t.Container + "@" + t.Start().UTC().Format(time.RFC3339Nano)
}

// Start is when a termination began: the earliest of the marks that can
// begin one (MarkDef.Begins). Terminations are ordered by it everywhere.
func (t Termination) Start() time.Time {
	return t.Marks.earliest(func(d MarkDef) bool { return d.Begins })
}

func (m Marks) earliest(keep func(MarkDef) bool) time.Time {
	var first time.Time
	for i, at := range m.times() {
		if keep(MarkDefs[i]) && !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}
