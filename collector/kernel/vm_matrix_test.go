//go:build vmguest

package kernel

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// matrixFeature is one row of the support matrix: what the suite counts,
// how many it made, and the probes that feed it.
type matrixFeature struct {
	name   string
	want   int
	probes []string
	// weaker: probes whose absence leaves a weaker rule (fallback), not
	// nothing: in flight from unread bytes at teardown without recv/send.
	weaker []string
	// optional: the feature may be unavailable on a kernel without failing
	// the suite (docs/support.md says where); a count it does report must still
	// be exact.
	optional bool
}

var matrixFeatures = []matrixFeature{
	{name: "refused", want: nRefused, probes: []string{"refused"}},
	{name: "accepted", want: nAccept, probes: []string{"sock_state"}},
	{name: "listen_close", want: 1, probes: []string{"sock_state"}},
	{name: "reset", want: nReset, probes: []string{"reset"}, optional: true},
	{name: "reset_no_socket", want: nLate, probes: []string{"refused"}, optional: true},
	{name: "signal", want: 1, probes: []string{"signal"}},
	{name: "exit", want: 1, probes: []string{"exit"}},
	// In flight comes from the socket's state at teardown on every
	// kernel; the message probes (sock_recv/sock_send) follow HTTP/2
	// streams only, which this suite does not speak.
	{name: "inflight_sigkill", want: nHeld, probes: []string{"sock_state"}},
	{name: "idle_keepalive", want: 0, probes: []string{"sock_state"}},
	{name: "idle_close", want: nIdleClosed, probes: []string{"sock_state"}},
	// Needs kfree_skb's drop reason (Linux >= 5.17).
	{name: "blackholed", want: nBlackholed, probes: []string{"blackhole"}, optional: true},
}

// checkMatrix prints one MATRIX line per feature and fails on every count
// that is not exact, with the kernel's probe table.
func checkMatrix(t *testing.T, probes []ProbeStatus, got map[string]int) {
	release := kernelRelease()
	for _, f := range matrixFeatures {
		state := featureState(f, probes)
		fmt.Printf("MATRIX kernel=%s arch=%s feature=%s state=%s got=%d want=%d\n",
			release, runtime.GOARCH, f.name, state, got[f.name], f.want)
		want := f.want
		if state == "unavailable" && f.optional {
			want = 0 // unavailable says so: nothing may be reported either
		}
		if got[f.name] != want {
			t.Errorf("%s on %s: got %d, want %d (state %s); probes:\n%s",
				f.name, release, got[f.name], want, state, probeTable(probes))
		}
	}
}

// featureState is the worst state of the probes a feature needs: exact
// when all are attached or on a fallback that counts the feature exactly,
// fallback when one runs on another fallback (or a weaker probe is not
// attached), unavailable when one is missing. The refused probe reports
// resets too where no reset probe is loaded (tcp_send_reset with its
// reason, Linux >= 6.10).
func featureState(f matrixFeature, probes []ProbeStatus) string {
	state := "exact"
	for _, name := range f.probes {
		p, ok := probeNamed(probes, name)
		if !ok && name == "reset" {
			// Only tcp_send_reset with its reason reports resets too.
			p, ok = probeNamed(probes, "refused")
			ok = ok && p.Hook == "tp_btf/tcp_send_reset"
		}
		switch {
		case !ok || p.State == ProbeUnavailable:
			return "unavailable"
		case p.State == ProbeAttached || exactFallback(f.name, p):
		case f.name == "reset_no_socket":
			return "unavailable" // the source without drop reasons: refusals only
		default:
			state = "fallback"
		}
	}
	for _, name := range f.weaker {
		if p, ok := probeNamed(probes, name); !ok || p.State != ProbeAttached {
			state = "fallback"
		}
	}
	return state
}

// exactFallback says whether a fallback counts a feature exactly: drop
// reason NO_SOCKET for refusals and RSTs without a socket; tcp_send_reset
// without its reason for RSTs of sockets (reason 0: no count uses it).
func exactFallback(feature string, p ProbeStatus) bool {
	switch feature {
	case "refused", "reset_no_socket":
		return p.Hook == "tp_btf/kfree_skb"
	case "reset":
		return p.Name == "reset"
	}
	return false
}

func probeNamed(probes []ProbeStatus, name string) (ProbeStatus, bool) {
	for _, p := range probes {
		if p.Name == name {
			return p, true
		}
	}
	return ProbeStatus{}, false
}

func probeTable(probes []ProbeStatus) string {
	var b strings.Builder
	WriteProbeTable(&b, probes)
	return b.String()
}
