package kernel

import (
	"testing"
	"time"
)

// A quiet ring buffer is polled less and less often, up to pollIdle; one
// poll that finds records brings the reader back to pollInterval.
func TestNextPollBacksOffWhileIdleAndReturnsOnARecord(t *testing.T) {
	ms := time.Millisecond
	reads := []bool{false, false, false, false, false, false, true, false}
	want := []time.Duration{40 * ms, 80 * ms, 160 * ms, 320 * ms, 320 * ms, 320 * ms, 20 * ms, 40 * ms}
	poll := pollInterval
	for i, read := range reads {
		poll = nextPoll(poll, read)
		if poll != want[i] {
			t.Fatalf("poll %d (read %v): %v, want %v", i+1, read, poll, want[i])
		}
	}
}
