package correlate

import (
	"testing"

	"github.com/drainwatch/drainwatch/collector"
)

// TestEveryEventTypeHasHandler: a new event type gets its handler in the
// dispatch table (see docs/architecture.md, "add a probe").
func TestEveryEventTypeHasHandler(t *testing.T) {
	for _, typ := range collector.EventTypes() {
		if handlers[typ] == nil {
			t.Errorf("no handler for %s", typ)
		}
	}
}
