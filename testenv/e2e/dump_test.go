package e2e_test

import (
	"sort"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
)

// dumpRefused logs, on a count mismatch, the refusals drainwatch saw and
// those the clients saw, relative to the stop, to find the odd one.
func dumpRefused(t *testing.T, got correlate.Termination, stop time.Time, reqs ...[]client.Request) {
	var ks, cs []float64
	for _, c := range got.Connections {
		if c.Refused {
			ks = append(ks, c.Time.Sub(stop).Seconds())
		}
	}
	for _, rs := range reqs {
		for _, r := range rs {
			if r.Outcome == client.Refused {
				cs = append(cs, r.Start.Sub(stop).Seconds())
			}
		}
	}
	sort.Float64s(ks)
	sort.Float64s(cs)
	t.Logf("kernel refused %v\nclient refused %v\nmarks %+v", ks, cs, got.Marks)
}
