package collector

import "testing"

// TestEventKindsComplete: every type has its row (a new constant without
// one would print as "" and panic in trace).
func TestEventKindsComplete(t *testing.T) {
	for _, typ := range append(EventTypes(), EventUnknown) {
		k := typ.Kind()
		if k.Name == "" || k.Text == nil {
			t.Errorf("%d: incomplete row %+v", typ, k)
		}
	}
	if got := EventType(NumEventTypes).String(); got != "type(11)" {
		t.Errorf("an unknown type prints %q, want type(11)", got)
	}
}
