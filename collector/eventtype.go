package collector

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// EventKind is everything the Go side declares about one event type, in
// one place: the decoder checks a record's type against this table, the
// kernel_events metric and trace's summary list its names, trace writes a
// line with Text, and the correlator attributes and replays by Process and
// WorthReplaying. Adding a type is a constant above NumEventTypes and a row
// in eventKinds (then a case in correlate's dispatch; see
// docs/architecture.md).
type EventKind struct {
	// Name is the type in `drainwatch trace` output and the type label of
	// drainwatch_kernel_events_total.
	Name string
	// Process events (signal, exit) are attributed by task (PID, cgroup);
	// the others are socket events, attributed by netns and address.
	Process bool
	// Replay says whether an event that arrives before the termination
	// it may belong to is kept to be replayed once it opens (see
	// Event.WorthReplaying). A rule, not a function: the check runs for
	// every attributed event, and a call through a func value would move
	// the event to the heap.
	Replay ReplayRule
	// Text appends trace's human fields after "time type netns=N".
	Text func(b *strings.Builder, r *TraceRecord)
}

var eventKinds = [NumEventTypes]EventKind{
	EventUnknown: {Name: "unknown", Replay: ReplayAlways, Text: socketText},
	// Accepts are too frequent to keep (the correlator's accepts ring
	// covers them); a listener opening before the termination is state,
	// not a mark.
	EventAccept:      {Name: "accept", Replay: ReplayNever, Text: socketText},
	EventListenOpen:  {Name: "listen_open", Replay: ReplayNever, Text: socketText},
	EventListenClose: {Name: "listen_close", Replay: ReplayAlways, Text: socketText},
	EventRefused:     {Name: "refused", Replay: ReplayAlways, Text: socketText},
	EventReset:       {Name: "reset", Replay: ReplayAlways, Text: socketText},
	// Of signals only SIGKILL and those to an init can matter (the Go
	// runtime alone sends SIGURG by the thousand).
	EventSignal:             {Name: "signal", Process: true, Replay: ReplayKillOrInit, Text: signalText},
	EventExit:               {Name: "exit", Process: true, Replay: ReplayAlways, Text: exitText},
	EventConnClosedInflight: {Name: "conn_closed_inflight", Replay: ReplayAlways, Text: socketText},
	// A drop comes after the pod's network is gone, so after its
	// termination opened: nothing to replay.
	EventBlackholed: {Name: "blackholed", Replay: ReplayNever, Text: socketText},
	// The correlator keeps idle closes per pod whether it terminates or
	// not: nothing to replay.
	EventIdleClose: {Name: "idle_close", Replay: ReplayNever, Text: idleText},
}

// Kind returns the type's row of the table (the unknown row for a type
// this build does not know).
func (t EventType) Kind() EventKind {
	if t.Known() {
		return eventKinds[t]
	}
	return eventKinds[EventUnknown]
}

// Known reports whether t is a type of this build (EventUnknown included).
func (t EventType) Known() bool { return t < NumEventTypes }

func (t EventType) String() string {
	if t.Known() {
		return eventKinds[t].Name
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// EventTypes lists every known type, in order, for summaries and metrics.
func EventTypes() []EventType {
	ts := make([]EventType, 0, NumEventTypes-1)
	for t := EventAccept; t < NumEventTypes; t++ {
		ts = append(ts, t)
	}
	return ts
}

// ReplayRule says which events of a type are kept for replay.
type ReplayRule uint8

const (
	ReplayAlways ReplayRule = iota
	ReplayNever
	// ReplayKillOrInit keeps SIGKILLs and signals to a namespace init.
	ReplayKillOrInit
)

// WorthReplaying applies its type's ReplayRule to e.
func (e *Event) WorthReplaying() bool {
	switch e.Type.Kind().Replay {
	case ReplayNever:
		return false
	case ReplayKillOrInit:
		return e.Signal == uint32(unix.SIGKILL) || e.TargetInit
	}
	return true
}
