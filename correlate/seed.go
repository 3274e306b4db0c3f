package correlate

import (
	"math"

	"github.com/drainwatch/drainwatch/collector"
)

// AcceptSummary merges the accepts the kernel held for a pod while its
// network namespace sent no record per connection: read once the records
// began (kernel.SetDetail), it holds exactly the accepts no kernel event
// carries. Each is counted as if its event had been processed then: in the
// pod's history, which a termination beginning afterwards takes over
// (begin), or, for a termination already open (a stop signal ahead of the
// deletion), in its counts, as a connection attempt when it came after the
// termination's start. Applied once per pod: a restarted daemon reading
// the same frozen history again changes nothing.
func (c *Correlator) AcceptSummary(s collector.AcceptSummary) {
	p := c.pods[s.PodUID]
	if p == nil || p.Seeded {
		return
	}
	p.Seeded = true
	if s.Accepts > 0 {
		p.KernelSeen = true
	}
	from := s.CompleteFrom.UnixNano()
	switch {
	case s.Inexact:
		from = math.MaxInt64 // no count from this history is known complete
	case s.CompleteFrom.IsZero():
		from = 0
	}
	if from != 0 {
		p.Accepts.raiseFloor(from)
	}
	for _, r := range s.Recent {
		t := p.Term
		c.clientAccept(p, r.Time, r.Cookie, t != nil && !r.Time.Before(t.Start))
	}
	p.LastAccept = later(p.LastAccept, s.LastAccept)
	if t := p.Term; t != nil {
		t.T.Marks.LastAccept = later(t.T.Marks.LastAccept, s.LastAccept)
		c.seedIncomplete(t, from)
	}
}

// seedIncomplete marks an open termination whose accept counts may miss
// held accepts from before from.
func (c *Correlator) seedIncomplete(t *termState, from int64) {
	if from == 0 {
		return
	}
	if t.Accepts != nil {
		t.Accepts.CompleteFrom = max(t.Accepts.CompleteFrom, from)
		return
	}
	if mark := t.T.Marks.EndpointsNotReady; mark.UnixNano() < from {
		addPartial(&t.T, PartialAcceptHistory)
	}
}
