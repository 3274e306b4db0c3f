package soak

import (
	"context"
	"time"

	"github.com/drainwatch/drainwatch/daemon"
)

// pinDirOf is where a daemon started by lab.StartDaemon (pinned, default
// pin path) pins the node's maps.
func pinDirOf(node string) string { return daemon.NodePinPath(daemon.DefaultPinPath, node) }

// run starts a rollout every Every until Duration has passed (a round that
// overruns delays the next one, never overlaps it). The daemon is sampled
// before the first round and after each: every sample is taken in the same
// phase (the round's terminations complete, the next rollout not begun),
// so that samples compare; with rounds on time that is once per Every.
func (s *soak) run(ctx context.Context) error {
	start := time.Now()
	s.sample(start)
	for i := 0; time.Since(start) < s.cfg.Duration; i++ {
		if !sleepUntil(ctx, start.Add(time.Duration(i)*s.cfg.Every)) {
			return ctx.Err()
		}
		if err := s.round(ctx, i); err != nil {
			return err
		}
		s.sample(start)
	}
	return nil
}

// settleFor bounds the wait for the goroutines a round leaves behind: the
// Events of its terminations, posted at client-go's 5 QPS, and each
// deleted pod's Event watch, held for its grace period (30 s here) + 30 s
// after its deletion (collector/kube's linger), so up to a minute after a
// round whose last pod was deleted just before it ended. 30 s was too
// short: an hour's run sampled 79 goroutines after round 44, 21 over idle.
const settleFor = 75 * time.Second

func (s *soak) sample(start time.Time) {
	settled, ok := s.settle()
	sm := takeSample(s.daemon, s.state, s.pinDir)
	if ok {
		// The count settle saw within the bound, not the one read a moment
		// later: a round's last Event posts and watches come and go
		// between the two (a sample read 79 against a bound of 78 after
		// settle had seen 78).
		sm.Goroutines = settled
	}
	sm.Elapsed, sm.Terminations = time.Since(start), s.terminations
	s.report.Samples = append(s.report.Samples, sm)
	s.cfg.Progress.Step("sample: %s", sm)
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// settle waits, up to settleFor, until the daemon's goroutines are back
// within their bound over the first sample, and returns that count; ok is
// false when they never were (a leak does not settle: the sample then
// reads its own count, over the bound) or before the first sample.
func (s *soak) settle() (int, bool) {
	if len(s.report.Samples) == 0 {
		return 0, false
	}
	limit := s.report.Samples[0].Goroutines + goroutineSlack
	for deadline := time.Now().Add(settleFor); time.Now().Before(deadline); time.Sleep(time.Second) {
		if n, err := goroutines(s.daemon.URL); err == nil && n <= limit {
			return n, true
		}
	}
	return 0, false
}
