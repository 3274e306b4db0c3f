package correlate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/drainwatch/drainwatch/collector"
)

// RST reasons (tcp_send_reset's reason, include/net/rstreason.h; the
// numbers of Linux 6.10 to 6.18) that answer data arriving on a connection
// the pod's server had already closed. A server that closes an idle
// keep-alive connection sends a FIN and leaves an orphaned socket; a
// request its upstream sends before it has processed that FIN meets:
//   - the orphan itself, in FIN_WAIT1 or FIN_WAIT2 (a full socket):
//     tcp_rcv_state_process aborts it, TCP_ABORT_ON_DATA;
//   - its timewait socket (substate FIN_WAIT2, what an orphan becomes once
//     its FIN is acknowledged): tcp_timewait_state_process answers
//     TCP_TW_RST, TCP_TIMEWAIT_SOCKET.
//
// Both are sent in softirq with the connection's socket (and cookie).
// Neither is a reset at shutdown: those are a close with unread data
// (TCP_ABORT_ON_CLOSE, in the closing process) or a segment that meets no
// socket at all (NO_SOCKET). Kernels before 6.10 name no reason, so they
// count none.
const (
	rstReasonAbortOnData     = 8
	rstReasonTimewaitSocket  = 9
	rstReasonAbortOnDataName = "TCP_ABORT_ON_DATA"
	rstReasonTimewaitName    = "TCP_TIMEWAIT_SOCKET"
)

// reuseResetReason names the RST reason of a reset on a reused connection,
// "" for any other reset.
func reuseResetReason(reason uint32) string {
	switch reason {
	case rstReasonAbortOnData:
		return rstReasonAbortOnDataName
	case rstReasonTimewaitSocket:
		return rstReasonTimewaitName
	}
	return ""
}

// ReuseResets details Counts.RequestsResetOnReusedConnections: how many
// of each RST reason, and how many came at or after the stop signal (the
// shutdown closed idle connections routing still used) rather than before
// it (an idle timeout shorter than the upstream's).
type ReuseResets struct {
	Reasons         map[string]int `json:"reasons,omitempty"`
	AfterStopSignal int            `json:"after_stop_signal"`
}

// WorkloadCount is a count for one workload (Revision empty).
type WorkloadCount struct {
	Workload collector.Workload `json:"workload"`
	N        int                `json:"n"`
}

// resetOnReuse counts a RST answering a request on a connection the pod's
// server had closed, and reports whether e was one. During a termination
// it counts into the termination, once per connection (a connection the
// shutdown already counted as reset or killed is not counted again);
// outside terminations into the workload's steady count.
func (c *Correlator) resetOnReuse(p *podState, e *collector.Event) bool {
	reason := reuseResetReason(e.Reason)
	if reason == "" || e.SockCookie == 0 || inPod(e) {
		return reason != ""
	}
	poolReuse(p, e)
	t := p.Term
	if t == nil {
		c.addSteadyReuse(p.Pod.Workload)
		return true
	}
	if !settle(t, e.SockCookie) {
		return true
	}
	t.T.Counts.RequestsResetOnReusedConnections++
	r := &t.T.ReuseResets
	if r.Reasons == nil {
		r.Reasons = make(map[string]int, 2)
	}
	r.Reasons[reason]++
	notePeer(t, e, peerResetOnReuse)
	if stop := t.T.Marks.StopSignal; !stop.IsZero() && !e.Time.Before(stop) {
		r.AfterStopSignal++
	}
	return true
}

// addSteadyReuse counts a reset on a reused connection of a pod that is not
// terminating, by workload: an idle-timeout mismatch in steady state.
func (c *Correlator) addSteadyReuse(w collector.Workload) { c.addSteadyReuseN(w, 1) }

func (c *Correlator) addSteadyReuseN(w collector.Workload, n int) {
	w.Revision = ""
	if c.steadyReuse == nil {
		c.steadyReuse = make(map[collector.Workload]int)
	}
	c.steadyReuse[w] += n
}

// TakeSteadyReuseResets returns the resets on reused connections counted
// outside terminations since the last call, by workload, and forgets
// them: the caller adds them to its cumulative counters (the daemon, at
// each tick, before the checkpoint that saves both).
func (c *Correlator) TakeSteadyReuseResets() []WorkloadCount {
	out := steadyList(c.steadyReuse)
	c.steadyReuse = nil
	return out
}

func steadyList(m map[collector.Workload]int) []WorkloadCount {
	out := make([]WorkloadCount, 0, len(m))
	for w, n := range m {
		out = append(out, WorkloadCount{Workload: w, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Workload, out[j].Workload
		return a.Namespace+"/"+a.Kind+"/"+a.Name < b.Namespace+"/"+b.Kind+"/"+b.Name
	})
	return out
}

// resetOnReuse diagnoses requests reset on reused connections: those after
// the stop signal mean the shutdown closed idle keep-alive connections that
// routing (a proxy's pool) still used; those before it an idle timeout
// shorter than the upstream's. The fix names the cause that dominates.
func resetOnReuse(t Termination) *Diagnosis {
	n := t.Counts.RequestsResetOnReusedConnections
	if n == 0 {
		return nil
	}
	after := t.ReuseResets.AfterStopSignal
	d := &Diagnosis{Code: DiagResetOnReuse, Message: fmt.Sprintf(
		"%d requests arrived on keep-alive connections the server had already closed and were reset (%s; %d after the stop signal, %d before it): a proxy with a connection pool answers each with a 502",
		n, reasonsText(t.ReuseResets.Reasons), after, n-after)}
	if after*2 >= n {
		d.Fix = "keep serving keep-alive connections until routing has converged (preStop sleep, a drain delay" + routingLagText(t) +
			"), then answer with `Connection: close` instead of closing idle connections under the proxy; keep the proxy's upstream idle timeout shorter than the server's"
	} else {
		d.Fix = "make the server's keep-alive idle timeout longer than every upstream pool's (Go http.Server.IdleTimeout > nginx keepalive_timeout / haproxy timeout http-keep-alive / Envoy idle_timeout)" +
			idleTimeoutText(t.KeepAlive)
	}
	return d
}

// reasonsText lists RST reasons with their counts in a fixed order.
func reasonsText(reasons map[string]int) string {
	var parts []string
	for _, r := range []string{rstReasonAbortOnDataName, rstReasonTimewaitName} {
		if n := reasons[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	return "RST reason " + strings.Join(parts, ", ")
}

// routingLagText is ": routing took 1.4s" when the routing lag is known,
// naming the slowest source when there is one.
func routingLagText(t Termination) string {
	if s, ok := t.SlowestSource(); ok {
		return fmt.Sprintf(": %s still sent %s after the endpoint became not ready", s.Source, FormatSeconds(s.Lag))
	}
	if lag, ok := t.RoutingLag(); ok {
		return ": routing took " + FormatSeconds(lag)
	}
	return ""
}
