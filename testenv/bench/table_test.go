package bench

import (
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want spread
	}{
		{[]float64{3, 1, 2}, spread{Median: 2, Min: 1, Max: 3}},
		{[]float64{4, 1, 2, 3}, spread{Median: 2.5, Min: 1, Max: 4}},
		{nil, spread{}},
	} {
		if got := spreadOf(tc.in); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestRowsAgainstTheSameRound checks that each mode is compared with the
// no-drainwatch run of its own round, not of another.
func TestRowsAgainstTheSameRound(t *testing.T) {
	s := func(round int, mode Mode, req uint64, daemon time.Duration) Sample {
		return Sample{Round: round, Mode: mode, Load: "close", Requests: req, Connections: req,
			Elapsed: time.Second, ServerCPU: time.Duration(req) * 10 * time.Microsecond, DaemonCPU: daemon}
	}
	samples := []Sample{
		s(0, ModeOff, 1000, 0), s(0, ModeWatched, 900, 5*time.Millisecond),
		s(1, ModeOff, 2000, 0), s(1, ModeWatched, 1600, 10*time.Millisecond),
	}
	var got row
	for _, r := range rows(samples) {
		if r.load == "close" && r.mode == ModeWatched {
			got = r
		}
	}
	if want := (spread{Median: 0.85, Min: 0.8, Max: 0.9}); !near(got.ratio, want) {
		t.Errorf("ratio = %+v, want %+v", got.ratio, want)
	}
	// 5 ms over 900 and 10 ms over 1600 connections: 5.556 and 6.25 µs.
	daemon := spread{Median: (5000.0/900 + 6.25) / 2}
	if !near(spread{Median: got.daemonPerConn}, daemon) || got.serverPerReq != 10 || got.serverRatio.Median != 1 {
		t.Errorf("daemon %.3f µs/conn, nginx %.1f µs/req (ratio %.3f), want 5.903, 10 and 1", got.daemonPerConn, got.serverPerReq, got.serverRatio.Median)
	}
}

func near(a, b spread) bool {
	d := func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }
	return d(a.Median, b.Median) && d(a.Min, b.Min) && d(a.Max, b.Max)
}
