package kernel

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestSlowConsumerDropsAndCounts: with nobody reading Events, the reader
// keeps draining the ring buffer, delivers what the channel holds and
// counts every other event as dropped, never blocking.
func TestSlowConsumerDropsAndCounts(t *testing.T) {
	const n, buffer = 40, 3
	l := newLab(t)
	k := openTestKernel(t, Options{Buffer: buffer})
	if err := k.WatchNetns(l.server.Inode()); err != nil {
		t.Fatal(err)
	}
	if got := refuse(t, l, n); got != n {
		t.Fatalf("client saw %d refusals, want %d", got, n)
	}
	// Wait (bounded) until every event is either queued or dropped.
	var st Stats
	for i := 0; i < 500; i++ {
		st, _ = k.Stats()
		if st.Dropped+uint64(len(k.Events())) >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Events[collector.EventRefused] != n || st.Dropped != n-buffer || st.LostInKernel != 0 || len(k.Events()) != buffer {
		t.Fatalf("stats %+v, %d queued; want %d decoded, %d dropped, %d queued", st, len(k.Events()), n, n-buffer, buffer)
	}
}
