package correlate

import (
	"strings"
	"testing"
)

// TestMessagesNameTheStartThatHappened: a termination the kubelet began
// (an eviction, a node shutdown) has no deletion; its messages are
// relative to the Killing, or to the stop signal, never to a deletion.
func TestMessagesNameTheStartThatHappened(t *testing.T) {
	base := Marks{StopSignal: ms(100), ListenerClosed: ms(101), Exit: ms(102)}
	cases := []struct {
		name  string
		marks func(Marks) Marks
		want  string
	}{
		{"deleted", func(m Marks) Marks { m.DeletionSeen = ms(0); return m }, "the listener closed 0.101s after the deletion"},
		{"evicted by the kubelet", func(m Marks) Marks { m.Killing = ms(0); return m }, "the listener closed 0.101s after the kubelet's Killing"},
		{"stop signal only", func(m Marks) Marks { return m }, "the listener closed 0.001s after the stop signal"},
	}
	for _, c := range cases {
		term := Termination{Marks: c.marks(base), Counts: Counts{RefusedAfterSigterm: 2}}
		d := listenerClosedEarly(term, DefaultConfig())
		if d == nil || !strings.Contains(d.Message, c.want) || (c.name != "deleted" && strings.Contains(d.Message, "deletion")) {
			t.Errorf("%s: %+v, want a message with %q and no deletion", c.name, d, c.want)
		}
	}
}
