package kernel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/collector"
)

// TestWriteSummary: trace's closing summary, counts per type and the lost.
func TestWriteSummary(t *testing.T) {
	var buf bytes.Buffer
	Stats{Events: map[collector.EventType]uint64{collector.EventRefused: 4}, Dropped: 2}.WriteSummary(&buf, nil)
	if !strings.Contains(buf.String(), "refused                4") || !strings.Contains(buf.String(), "lost                   2") {
		t.Fatalf("summary: %q", buf.String())
	}
}
