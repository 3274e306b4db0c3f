package e2e_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/router"
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

// dumpRouter logs, on a mismatch, the router's refusals to addr and the
// termination's refusals, relative to its stop signal.
func dumpRouter(t *testing.T, got correlate.Termination, r *router.Router, addr string) {
	stop := got.Marks.StopSignal
	var rs, ks []string
	for _, cn := range r.Conns() {
		if cn.Backend == addr && cn.Outcome == router.Refused {
			// accepted..dialed: the backend's RST came in between.
			rs = append(rs, fmt.Sprintf("%.3f..%.3f", cn.Accepted.Sub(stop).Seconds(), cn.Dialed.Sub(stop).Seconds()))
		}
	}
	for _, c := range got.Connections {
		if c.Refused {
			// A kubelet probe's refusal is marked: it is not the router's.
			ks = append(ks, fmt.Sprintf("%.3f%s", c.Time.Sub(stop).Seconds(), map[bool]string{true: "(probe)"}[c.Probe]))
		}
	}
	outcomes := map[string]int{}
	for _, cn := range r.Conns() {
		if cn.Backend == addr {
			outcomes[cn.Outcome+" "+cn.Err]++
		}
	}
	t.Logf("%s (%s): router refused at %v\nkernel refused at %v\nnode-local sources %+v\nrouter outcomes %v\nmarks %+v",
		got.Pod, addr, rs, ks, got.Sources, outcomes, got.Marks)
}

// dumpBlackholes shows, relative to the pod's exit, the router's dials to
// addr that failed without a refusal (dial start..end and error) and the
// drops drainwatch counted as blackholed: where a blackhole count differs,
// which attempts one side has and the other not.
func dumpBlackholes(t *testing.T, got correlate.Termination, r *router.Router, addr string) {
	ref := got.Marks.Exit
	var rs, ks []string
	for _, cn := range r.Conns() {
		if cn.Backend == addr && lab.BlackholedByBackend(cn) {
			rs = append(rs, fmt.Sprintf("%.3f..%.3f %s", cn.Accepted.Sub(ref).Seconds(), cn.Dialed.Sub(ref).Seconds(), cn.Err))
		}
	}
	for _, c := range got.Connections {
		if c.Blackholed {
			ks = append(ks, fmt.Sprintf("%.3f", c.Time.Sub(ref).Seconds()))
		}
	}
	t.Logf("%s (%s), relative to its exit: router dials failed without a refusal (%d):\n%s\ndrainwatch blackholed drops (%d): %v",
		got.Pod, addr, len(rs), strings.Join(rs, "\n"), len(ks), ks)
}
