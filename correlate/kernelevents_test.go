package correlate

import (
	"testing"

	"github.com/drainwatch/drainwatch/collector"
)

// TestEveryEventTypeHasHandler: a new event type gets its case in dispatch
// (see docs/architecture.md, "add a probe").
func TestEveryEventTypeHasHandler(t *testing.T) {
	c := New(Config{})
	for _, typ := range collector.EventTypes() {
		e := collector.Event{Type: typ}
		if !c.dispatch(&podState{}, "", &e) {
			t.Errorf("no handler for %s", typ)
		}
	}
}
