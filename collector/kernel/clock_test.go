package kernel

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestRealtimeStepsDoNotReorderMarks measures the clock once against a fake
// realtime clock, then steps that clock back an hour, forward two hours
// and back a second between kernel events stamped 1 ms apart on the
// monotonic clock: the decoded times keep the monotonic order and spacing,
// each exactly start + its monotonic delta. (The machine's clock is not
// stepped: other processes share it.)
func TestRealtimeStepsDoNotReorderMarks(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const mono0 = int64(1000 * time.Second)
	realtime := start.UnixNano()
	clk, err := measureWallClock(func() (int64, error) { return mono0, nil }, func() int64 { return realtime })
	if err != nil {
		t.Fatal(err)
	}
	steps := []time.Duration{0, -time.Hour, 2 * time.Hour, -time.Second}
	var prev time.Time
	for i, step := range steps {
		realtime += int64(step) // what a later reading of the realtime clock would see
		mono := mono0 + int64(i)*int64(time.Millisecond)
		var ev collector.Event
		if err := decodeEvent(recordOf(&rawEvent{Type: uint8(collector.EventAccept), TsNs: uint64(mono)}), clk, &ev); err != nil {
			t.Fatal(err)
		}
		if want := start.Add(time.Duration(mono - mono0)); !ev.Time.Equal(want) {
			t.Errorf("event %d after a realtime step of %v: decoded %v, want %v", i, step, ev.Time, want)
		}
		if i > 0 && ev.Time.Sub(prev) != time.Millisecond {
			t.Errorf("event %d: %v after the previous one, want 1ms (monotonic spacing)", i, ev.Time.Sub(prev))
		}
		prev = ev.Time
	}
}

// TestWallClockFromRunningClocks: the clock measured from the machine's
// clocks converts the monotonic now to within a second of the realtime now.
func TestWallClockFromRunningClocks(t *testing.T) {
	clk, err := newWallClock()
	if err != nil {
		t.Fatal(err)
	}
	mono, err := monotonicNs()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(clk.wall(uint64(mono))).Abs(); d > time.Second {
		t.Errorf("the monotonic now converts %v away from the realtime now", d)
	}
}
