package exporter

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// TestWriteRoutingSources: the sources still sending after
// endpoints_not_ready (+0.250 s in the naive fixture) print as a table,
// last sends relative to the stop signal, the unknown row without a time.
func TestWriteRoutingSources(t *testing.T) {
	tm := naiveTermination()
	mark := tm.Marks.EndpointsNotReady
	tm.RoutingSources = []correlate.RoutingSource{
		{Source: "pod 10.244.2.7 on node node-2", Kind: correlate.SourcePod, Addrs: []netip.Addr{netip.MustParseAddr("10.244.2.7")},
			Accepted: 2, Refused: 30, ResetOnReuse: 1, Last: mark.Add(time.Second), Lag: time.Second},
		{Source: "node node-1", Kind: correlate.SourceNode, Refused: 14, Last: mark.Add(400 * time.Millisecond), Lag: 400 * time.Millisecond},
		{Source: "unknown source (accepted before the termination was seen)", Kind: correlate.SourceUnknown, Accepted: 1},
	}
	var b strings.Builder
	if err := WriteTimelines(&b, []TerminationView{NewTerminationView(tm)}); err != nil {
		t.Fatal(err)
	}
	want := `  sending after endpoints_not_ready (slowest first):
    source                                                           last       lag  accepted  refused  reset on reuse
    pod 10.244.2.7 on node node-2                                 +1.250s    1.000s         2       30               1
    node node-1                                                   +0.650s    0.400s         0       14               0
    unknown source (accepted before the termination was seen)           -         -         1        0               0
`
	if !strings.Contains(b.String(), want) {
		t.Errorf("got:\n%s\nwant it to contain:\n%s", b.String(), want)
	}
	page := newTimelineView(tm)
	if len(page.RoutingSources) != 3 || page.RoutingSources[0].Last != "+1.250s" || page.RoutingSources[0].Lag != "1.000s" {
		t.Errorf("page rows %+v", page.RoutingSources)
	}
}
