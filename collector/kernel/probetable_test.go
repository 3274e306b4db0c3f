package kernel

import (
	"strings"
	"testing"
)

func TestWriteProbeTable(t *testing.T) {
	var b strings.Builder
	WriteProbeTable(&b, []ProbeStatus{
		{Name: "sock_state", Hook: "tp_btf/inet_sock_set_state", State: ProbeAttached},
		{Name: "refused", Hook: "tp_btf/kfree_skb", State: ProbeFallback, Loses: "resets", Detail: "no reason"},
		{Name: "sock_recv", Hook: "tp_btf/sock_recv_length", State: ProbeUnavailable, Detail: "not supported"},
	})
	want := `PROBE       STATE        HOOK                        LOSES   DETAIL
sock_state  attached     tp_btf/inet_sock_set_state  -       -
refused     fallback     tp_btf/kfree_skb            resets  no reason
sock_recv   unavailable  tp_btf/sock_recv_length     -       not supported
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestProbePartialReason: a missing probe and a fallback that loses events
// name themselves; a fallback that loses nothing marks nothing.
func TestProbePartialReason(t *testing.T) {
	for _, c := range []struct {
		p    ProbeStatus
		want string
	}{
		{ProbeStatus{Name: "sock_recv", State: ProbeUnavailable}, "probe_unavailable:sock_recv"},
		{ProbeStatus{Name: "refused", State: ProbeFallback, Loses: "resets"}, "probe_fallback:refused"},
		{ProbeStatus{Name: "exit", State: ProbeFallback}, ""},
		{ProbeStatus{Name: "signal", State: ProbeAttached}, ""},
	} {
		if got := c.p.PartialReason(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}
