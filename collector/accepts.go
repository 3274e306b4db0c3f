package collector

import (
	"errors"
	"time"
)

// AcceptSummary is what the kernel kept about a pod's accepts while its
// network namespace sent no record per connection (no termination in
// progress): counters, and the history a termination needs from before it
// began. Read once when per-connection records begin (kernel.SetDetail),
// it holds exactly the accepts the ring buffer did not carry, and seeds
// the correlator's accept history (correlate.AcceptSummary).
type AcceptSummary struct {
	PodUID   string
	NetnsIno uint32
	// Accepts and Probes count every accept of the scope since it was
	// watched, record or not; Probes those the kubelet's probes made.
	Accepts, Probes uint64
	// Held counts the accepts that sent no record, probes excepted;
	// LastAccept is the latest of them, Recent the latest few, oldest
	// first.
	Held       uint64
	LastAccept time.Time
	Recent     []AcceptRecord
	// CompleteFrom is the time since which Recent holds every held accept
	// (zero: Recent holds them all).
	CompleteFrom time.Time
	// Inexact is set when the handover from held accepts to records could
	// not be made exact (see kernel.SetDetail): an accept at that moment
	// may be missing.
	Inexact bool
}

// AcceptRecord is one held accept: its time and socket cookie.
type AcceptRecord struct {
	Time   time.Time
	Cookie uint64
}

// ErrHandoverInexact says that the kernel could not make the handover from
// held accepts to per-connection records exact (kernel.SetDetail): the
// summary read afterwards may miss an accept made at that moment.
var ErrHandoverInexact = errors.New("accept handover not exact")
