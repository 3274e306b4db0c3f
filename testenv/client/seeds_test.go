package client

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/workload"
)

// runWorkload starts testenv's workload server in-process on a free loopback
// port and returns its address and its stop-signal channel.
func runWorkload(t *testing.T, cfg workload.Config) (string, chan os.Signal, chan error) {
	t.Helper()
	cfg.Addr = closedPort(t)
	cfg.ShutdownTimeout, cfg.WorkDuration = 10*time.Second, 20*time.Millisecond
	stop, done := make(chan os.Signal, 1), make(chan error, 1)
	go func() { done <- workload.New(cfg, zerolog.Nop()).Run(context.Background(), stop) }()
	for i := 0; i < 100; i++ {
		if r := Get(context.Background(), loopback, cfg.Addr, "/ready", time.Second, nil); r.Outcome == OK {
			return cfg.Addr, stop, done
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("workload %s never became ready", cfg.Mode)
	return "", nil, nil
}

// TestSeedsExperiment reproduces the seeds' measurement with clients only:
// naive closes its listener at the signal and refuses every request of the
// following second; protocol with a 1.5 s drain delay refuses none and fails
// readiness at once. Both finish the in-flight /slow. Stop waits 5 ms after
// handing over the signal, the time a real process takes to get it, so the
// first /work is not racing the signal.
func TestSeedsExperiment(t *testing.T) {
	cases := []struct {
		cfg         workload.Config
		work, ready Summary
	}{
		{workload.Config{Mode: workload.ModeNaive}, Summary{Refused: 50}, Summary{Refused: 20}},
		{workload.Config{Mode: workload.ModeProtocol, DrainDelay: 1500 * time.Millisecond},
			Summary{OK: 50}, Summary{HTTPStatus(503): 20}},
	}
	for _, tc := range cases {
		t.Run(tc.cfg.Mode, func(t *testing.T) {
			addr, stop, done := runWorkload(t, tc.cfg)
			res, err := Seeds{Dial: loopback, Target: addr, Pod: addr, SlowMs: 500, Stop: func(context.Context) error {
				stop <- syscall.SIGTERM
				time.Sleep(5 * time.Millisecond)
				return nil
			}}.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s:\n%s", tc.cfg.Mode, res.Timeline())
			if got := Summarize(res.Work); got.String() != tc.work.String() {
				t.Errorf("/work after stop: %v, want %v", got, tc.work)
			}
			if got := Summarize(res.Readiness); got.String() != tc.ready.String() {
				t.Errorf("/ready after stop: %v, want %v", got, tc.ready)
			}
			if res.Slow.Outcome != OK {
				t.Errorf("in-flight /slow: %s (%s), want ok", res.Slow.Outcome, res.Slow.Err)
			}
			if err := <-done; err != nil {
				t.Errorf("workload exit: %v", err)
			}
		})
	}
}
