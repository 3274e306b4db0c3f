package correlate

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// maxRoutingSources bounds Termination.RoutingSources: the slowest
// sources by lag, the rest summed into one "others" row.
const maxRoutingSources = 8

// maxSourceAddrs bounds the addresses listed per source.
const maxSourceAddrs = 4

// RoutingSource is one traffic source that still sent to the pod at or
// after endpoints_not_ready: the connections it opened (accepted or
// refused) and the requests it sent on reused connections that were reset,
// when it last sent, and Lag, how long after the mark that was (a lower
// bound of that source's routing lag). Source names it (peernames.go):
// "node n1" (that node's kube-proxy rules, or a host process of it),
// "pod ns/name" or "pod 10.244.2.7 on node n2" (a client pod routed by its
// node's kube-proxy, or an L7 proxy pod), "external 192.0.2.7"; the
// "others" row sums the sources past the bound (Sources of them; "other
// sources" without a number when addresses past maxPeerAddrs are in it).
type RoutingSource struct {
	Source       string        `json:"source"`
	Kind         string        `json:"kind"`
	Addrs        []netip.Addr  `json:"addrs,omitempty"`
	Sources      int           `json:"sources,omitempty"`
	Accepted     int           `json:"accepted"`
	Refused      int           `json:"refused"`
	ResetOnReuse int           `json:"reset_on_reuse"`
	Last         time.Time     `json:"last,omitzero"`
	Lag          time.Duration `json:"lag"`
}

// routingSources names and ranks the peers of t at or after
// endpoints_not_ready, slowest first; nil while the mark is unknown.
func (c *Correlator) routingSources(ts *termState) []RoutingSource {
	mark := ts.T.Marks.EndpointsNotReady
	if mark.IsZero() {
		return nil
	}
	peers := ts.Peers
	if peers == nil {
		peers = &peerTally{}
	}
	peers.fold(mark)
	var out []RoutingSource
	at := make(map[string]int)
	for addr, n := range peers.ByAddr {
		kind, name := c.peerName(addr, n.Last)
		i, ok := at[name]
		if !ok {
			i, at[name] = len(out), len(out)
			out = append(out, RoutingSource{Source: name, Kind: kind})
		}
		out[i].add(n, mark)
		if len(out[i].Addrs) < maxSourceAddrs {
			out[i].Addrs = append(out[i].Addrs, addr)
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Addrs, netip.Addr.Compare)
	}
	slices.SortFunc(out, slowestFirst)
	out = boundSources(out, peers.Others, mark)
	return withUnknown(out, ts.T.Counts.AcceptedAfterEndpointsNotReady)
}

// withUnknown adds a row for the accepts after endpoints_not_ready that
// carried no address: those processed before the termination began (the
// pod's accept history) and those the kernel held without a record
// (collector.AcceptSummary). Their number is known, their source and time
// are not, so the rows always sum to the termination's counts.
func withUnknown(out []RoutingSource, accepted int) []RoutingSource {
	for _, s := range out {
		accepted -= s.Accepted
	}
	if accepted <= 0 {
		return out
	}
	return append(out, RoutingSource{Source: "unknown source (accepted before the termination was seen)", Kind: SourceUnknown, Accepted: accepted})
}

func (s *RoutingSource) add(n *peerCounts, mark time.Time) {
	s.Accepted += n.Accepted
	s.Refused += n.Refused
	s.ResetOnReuse += n.ResetOnReuse
	s.Last = later(s.Last, n.Last)
	s.Lag = s.Last.Sub(mark)
}

func slowestFirst(a, b RoutingSource) int {
	if c := b.Last.Compare(a.Last); c != 0 {
		return c
	}
	return cmp.Compare(a.Source, b.Source)
}

// boundSources keeps the slowest maxRoutingSources-1 sources and sums the
// rest, with the addresses past maxPeerAddrs, into an "others" row.
func boundSources(out []RoutingSource, others *peerCounts, mark time.Time) []RoutingSource {
	if len(out) <= maxRoutingSources && others == nil {
		return out
	}
	keep := min(len(out), maxRoutingSources-1)
	rest := RoutingSource{Kind: SourceOthers}
	for _, s := range out[keep:] {
		rest.add(&peerCounts{Accepted: s.Accepted, Refused: s.Refused, ResetOnReuse: s.ResetOnReuse, Last: s.Last}, mark)
		rest.Sources++
	}
	rest.Source = fmt.Sprintf("%d other sources", rest.Sources)
	if others != nil {
		// Addresses past maxPeerAddrs were summed without being counted.
		rest.add(others, mark)
		rest.Source = "other sources"
	}
	return append(out[:keep], rest)
}

// SlowestSource is the source that sent last after endpoints_not_ready
// (the "others" row included: it may hold the addresses past the bound).
func (t Termination) SlowestSource() (RoutingSource, bool) {
	var slowest RoutingSource
	for _, s := range t.RoutingSources {
		if s.Last.After(slowest.Last) {
			slowest = s
		}
	}
	return slowest, !slowest.Last.IsZero()
}

// slowestText is "; slowest source: node n1, 1.2s after the endpoint
// became not ready", or "" without sources.
func slowestText(t Termination) string {
	s, ok := t.SlowestSource()
	if !ok {
		return ""
	}
	return fmt.Sprintf("; slowest source: %s, %s after the endpoint became not ready", s.Source, FormatSeconds(s.Lag))
}
