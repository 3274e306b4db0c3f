package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/collector/kernel"
)

// Liveness bounds: past them /healthz fails and the kubelet restarts the
// daemon (the pinned programs keep counting across the restart).
const (
	// StuckTicks: a loop that processed no tick for this many tick periods
	// (30 s at the default 250 ms) is stuck, not busy.
	StuckTicks = 120
	// ReadFailingFor: ring-buffer reads that keep failing this long do not
	// recover by retrying; a new reader might.
	ReadFailingFor = time.Minute
	// APIFailingFor: the pod watch may fail this long before the daemon
	// counts as dead. A short API-server outage (an upgrade, a leader
	// change) must not restart every daemon of the cluster at once: the
	// kernel side keeps counting meanwhile and the informer relists on
	// return. Five minutes is past a control-plane rolling upgrade, and
	// short enough that a daemon cut off for good (a revoked token, a
	// broken route) is restarted and says so in its pod's restarts.
	APIFailingFor = 5 * time.Minute
)

// readerHealth is the kernel side's reader state: *kernel.Kernel has it;
// a fake kernel may not.
type readerHealth interface {
	ReaderHealth() kernel.ReaderHealth
}

// Healthy is /healthz: nil while the daemon works, otherwise every reason
// it does not (safe for concurrent use; meaningful once Run started).
func (d *Daemon) Healthy() error {
	now := d.cfg.Now()
	return errors.Join(d.readerHealthy(now), d.loopHealthy(now), d.watchHealthy(now))
}

func (d *Daemon) readerHealthy(now time.Time) error {
	r, ok := d.kernel.(readerHealth)
	if !ok {
		return nil
	}
	h := r.ReaderHealth()
	switch {
	case h.Stopped:
		return errors.New("the ring-buffer reader stopped: no kernel event is read")
	case !h.FailingSince.IsZero() && now.Sub(h.FailingSince) > ReadFailingFor:
		return fmt.Errorf("ring-buffer reads failing since %s: %w", h.FailingSince.UTC().Format(time.RFC3339), h.Err)
	}
	return nil
}

func (d *Daemon) loopHealthy(now time.Time) error {
	beat := d.beat.Load()
	if beat == 0 {
		return nil // the loop has not started yet
	}
	last := time.Unix(0, beat)
	if bound := StuckTicks * d.cfg.TickEvery; now.Sub(last) > bound {
		return fmt.Errorf("the daemon loop processed no tick since %s (bound %s): it is stuck",
			last.UTC().Format(time.RFC3339), bound)
	}
	return nil
}

func (d *Daemon) watchHealthy(now time.Time) error {
	k := d.kube.Load()
	if k == nil {
		return nil
	}
	f := k.WatchFailure()
	if f.Since.IsZero() || now.Sub(f.Since) <= APIFailingFor {
		return nil
	}
	return fmt.Errorf("the pod watch has been failing since %s (bound %s): %w",
		f.Since.UTC().Format(time.RFC3339), APIFailingFor, f.Err)
}
