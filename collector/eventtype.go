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
// in eventKinds (then a handler in correlate's dispatch table; see
// docs/architecture.md).
type EventKind struct {
	// Name is the type in `drainwatch trace` output and the type label of
	// drainwatch_kernel_events_total.
	Name string
	// Process events (signal, exit) are attributed by task (PID, cgroup);
	// the others are socket events, attributed by netns and address.
	Process bool
	// WorthReplaying says whether an event that arrives before the
	// termination it may belong to is kept to be replayed once it opens.
	WorthReplaying func(e *Event) bool
	// Text appends trace's human fields after "time type netns=N".
	Text func(b *strings.Builder, r *TraceRecord)
}

var eventKinds = [NumEventTypes]EventKind{
	EventUnknown: {Name: "unknown", WorthReplaying: always, Text: socketText},
	// Accepts are too frequent to keep (the correlator's accepts ring
	// covers them); a listener opening before the termination is state,
	// not a mark.
	EventAccept:      {Name: "accept", WorthReplaying: never, Text: socketText},
	EventListenOpen:  {Name: "listen_open", WorthReplaying: never, Text: socketText},
	EventListenClose: {Name: "listen_close", WorthReplaying: always, Text: socketText},
	EventRefused:     {Name: "refused", WorthReplaying: always, Text: socketText},
	EventReset:       {Name: "reset", WorthReplaying: always, Text: socketText},
	// Of signals only SIGKILL and those to an init can matter (the Go
	// runtime alone sends SIGURG by the thousand).
	EventSignal:             {Name: "signal", Process: true, WorthReplaying: killOrInit, Text: signalText},
	EventExit:               {Name: "exit", Process: true, WorthReplaying: always, Text: exitText},
	EventConnClosedInflight: {Name: "conn_closed_inflight", WorthReplaying: always, Text: socketText},
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

func never(*Event) bool  { return false }
func always(*Event) bool { return true }

func killOrInit(e *Event) bool { return e.Signal == uint32(unix.SIGKILL) || e.TargetInit }
