package correlate

import (
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// KeepAlive is what the pod's server closing idle keep-alive connections,
// and a pool in front reusing one of them afterwards, measured of the idle
// timeouts on both sides, over the pod's life until its stop signal:
//
//   - IdleCloses, IdleMin and IdleMax: connections the server closed after
//     carrying no data for at least kernel.IdleCloseMin (EventIdleClose),
//     and how long they had been idle (the server's idle timeout, to the
//     kernel's tick);
//   - PoolReuses and PoolIdleMax: resets on reuse whose connection's idle
//     close was seen, and the longest a pool had held such a connection
//     idle when it sent the request the server's kernel reset: the reset's
//     time minus the connection's last data (close − idle). The server's
//     idle timeout must exceed it.
//
// The closes the shutdown makes after the stop signal are not an idle
// timeout and are left out, as are the resets that follow them.
type KeepAlive struct {
	IdleCloses  int           `json:"idle_closes,omitempty"`
	IdleMin     time.Duration `json:"idle_min,omitempty"`
	IdleMax     time.Duration `json:"idle_max,omitempty"`
	PoolReuses  int           `json:"pool_reuses,omitempty"`
	PoolIdleMax time.Duration `json:"pool_idle_max,omitempty"`
}

// idleClose is one connection the server closed idle: its cookie, when it
// closed and after how long idle.
type idleClose struct {
	Cookie uint64        `json:"cookie"`
	At     time.Time     `json:"at"`
	Idle   time.Duration `json:"idle"`
}

// idleRingSize bounds the idle closes kept per pod to match resets
// against: a pool reuses a connection within its own idle timeout of the
// close, and a pod closes few idle connections in that time.
const idleRingSize = 32

// idleRing is a pod's latest idle closes.
type idleRing struct {
	C    []idleClose `json:"c,omitempty"`
	Next int         `json:"next,omitempty"`
}

func (r *idleRing) push(c idleClose) {
	if len(r.C) < idleRingSize {
		r.C = append(r.C, c)
		return
	}
	r.C[r.Next] = c
	r.Next = (r.Next + 1) % idleRingSize
}

// take finds the close of the connection cookie and forgets it: a
// connection is reused once after its close (its orphan's RST and a later
// one of its timewait socket are one reuse).
func (r *idleRing) take(cookie uint64) (idleClose, bool) {
	for i, c := range r.C {
		if c.Cookie == cookie {
			r.C[i].Cookie = 0
			return c, true
		}
	}
	return idleClose{}, false
}

// beforeStopSignal says whether an event at at comes before the stop
// signal of p's termination (always, without one).
func beforeStopSignal(p *podState, at time.Time) bool {
	if p.Term == nil {
		return true
	}
	stop := p.Term.T.Marks.StopSignal
	return stop.IsZero() || at.Before(stop)
}

// idleClosed takes the server closing an idle connection.
func (c *Correlator) idleClosed(p *podState, e *collector.Event) {
	if e.SockCookie == 0 || !beforeStopSignal(p, e.Time) {
		return
	}
	idle := e.Idle()
	p.IdleCloses.push(idleClose{Cookie: e.SockCookie, At: e.Time, Idle: idle})
	k := &p.KeepAlive
	if k.IdleCloses == 0 || idle < k.IdleMin {
		k.IdleMin = idle
	}
	k.IdleCloses++
	k.IdleMax = max(k.IdleMax, idle)
	syncKeepAlive(p)
}

// poolReuse takes a reset on a reused connection before the stop signal:
// when the server's idle close of that connection was seen, how long the
// pool had held it idle.
func poolReuse(p *podState, e *collector.Event) {
	if !beforeStopSignal(p, e.Time) {
		return
	}
	ic, ok := p.IdleCloses.take(e.SockCookie)
	if !ok {
		return
	}
	k := &p.KeepAlive
	k.PoolReuses++
	k.PoolIdleMax = max(k.PoolIdleMax, e.Time.Sub(ic.At.Add(-ic.Idle)))
	syncKeepAlive(p)
}

// syncKeepAlive copies the pod's keep-alive measurements into its open
// termination's record.
func syncKeepAlive(p *podState) {
	if p.Term != nil {
		p.Term.T.KeepAlive = p.KeepAlive
	}
}

// idleTimeoutText is the measured idle timeouts a reset-on-reuse fix
// names: "" when no pool reuse was matched to an idle close.
func idleTimeoutText(k KeepAlive) string {
	if k.PoolReuses == 0 {
		return ""
	}
	return fmt.Sprintf(": the server closed idle connections after %s to %s, a pool reused one %s after its last data (%d such resets); the server's timeout must exceed %s",
		FormatSecondsMs(k.IdleMin), FormatSecondsMs(k.IdleMax), FormatSecondsMs(k.PoolIdleMax), k.PoolReuses, FormatSecondsMs(k.PoolIdleMax))
}
