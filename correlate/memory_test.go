package correlate

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// TestDoneTerminationsHeap completes 5,000 terminations of 200 refusals
// each, all within Retention, and measures the heap the correlator keeps
// for them: only what ignoring replays needs (uid and completion time),
// not the records Tick returned (issue 16: RSS grew ~37 KiB per
// termination in an hour-long soak).
func TestDoneTerminationsHeap(t *testing.T) {
	const n, conns = 5000, 200
	c := New(Config{Retention: 48 * time.Hour})
	before := heapInUse()
	for i := range n {
		uid := fmt.Sprintf("uid-%05d", i)
		ip := netip.AddrFrom4([4]byte{10, 244, byte(i / 250), byte(i%250 + 1)})
		ino, cg, base := netA+uint32(i), cgA+uint64(i), i*1000
		feed(c, []any{
			born(uid, ip, ino, cg, 30*time.Second, ms(base-60000)), openListener(ino, ms(base-59000)),
			deleting(uid, ip, 30*time.Second, ms(base-20), ms(base-10)), signal(cg, initPID, 15, true, "server", ms(base)),
			refusals(ino, ip, conns, base+1, 1), exited(cg, initPID, 0, 0, true, ms(base+conns+10)), gone(uid, ms(base+conns+20)),
		})
		if done := c.Tick(ms(base + conns + 20 + 60000)); len(done) != 1 || len(done[0].Connections) != conns {
			t.Fatalf("termination %d: Tick completed %d", i, len(done))
		}
	}
	per := (heapInUse() - before) / n
	runtime.KeepAlive(c)
	t.Logf("heap kept by the correlator per completed termination: %d bytes (%d terminations of %d refusals)", per, n, conns)
	if per > 512 {
		t.Errorf("the correlator keeps %d bytes per completed termination, want at most 512 (its uid and time)", per)
	}
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
