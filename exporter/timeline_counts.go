package exporter

import (
	"bufio"
	"fmt"
	"sort"
	"strings"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// writeCounts prints the exact counts of a termination, four rows (five
// with blackholed connections, which only a pod whose network went while
// routing still sent there has): what
// clients lost, what routing and exit did, what the shutdown reset and the
// kubelet's probes met (never part of the rows above), and the requests
// reset on reused keep-alive connections with their RST reasons (and,
// when the server closed idle connections, the idle timeouts measured).
func writeCounts(w *bufio.Writer, t correlate.Termination) {
	c := t.Counts
	sig := StopSignalName(t)
	printLine(w, "  refused after %s: %d  killed by SIGKILL: %d  killed at exit: %d  refused before %s: %d",
		sig, c.RefusedAfterSigterm, c.RequestsKilledBySigkill, c.RequestsKilledAtExit, sig, c.RefusedBeforeSigterm)
	if c.ConnectionsBlackholed > 0 {
		printLine(w, "  blackholed: %d%s", c.ConnectionsBlackholed, blackholeDetail(t))
	}
	if c.RefusedInsidePod > 0 {
		printLine(w, "  refused inside the pod: %d%s", c.RefusedInsidePod, insideDetail(t))
	}
	printLine(w, "  in flight at stop signal: %d  accepted after endpoint removal: %d  reset at exit: %d",
		c.InflightAtStopSignal, c.AcceptedAfterEndpointsNotReady, c.ConnectionsResetAtExit)
	printLine(w, "  reset at shutdown: %d  streams killed by SIGKILL: %d  probe refusals: %d",
		c.ConnectionsResetAtShutdown, c.StreamsKilledBySigkill, c.ProbeRefused)
	printLine(w, "  reset on reused connections: %d%s", c.RequestsResetOnReusedConnections, reuseDetail(t.ReuseResets))
	if k := t.KeepAlive; k.IdleCloses > 0 {
		printLine(w, "  keep-alive: the server closed %d idle connections after %s to %s idle; a pool reused %d of them, the longest %s after its last data",
			k.IdleCloses, correlate.FormatSecondsMs(k.IdleMin), correlate.FormatSecondsMs(k.IdleMax), k.PoolReuses, correlate.FormatSecondsMs(k.PoolIdleMax))
	}
}

// insideDetail is " (a sidecar's forwards to :8080 13)" for the refusals
// inside a pod, by port.
func insideDetail(t correlate.Termination) string {
	parts := make([]string, len(t.RefusedInsidePorts))
	for i, p := range t.RefusedInsidePorts {
		parts[i] = fmt.Sprintf(":%d %d", p.Port, p.Count)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (a sidecar's forwards to " + strings.Join(parts, ", ") + ")"
}

// blackholeDetail is " (sent after the pod's network was gone; the last
// dropped 1.6s after the deletion)".
func blackholeDetail(t correlate.Termination) string {
	if when := t.LastBlackholedAfter(); when != "" {
		return " (sent after the pod's network was gone; the last dropped " + when + ")"
	}
	return " (sent after the pod's network was gone)"
}

// reuseDetail is " (after the stop signal: 2; TCP_TIMEWAIT_SOCKET 2)" for
// resets on reused connections, "" without any.
func reuseDetail(r correlate.ReuseResets) string {
	if len(r.Reasons) == 0 {
		return ""
	}
	names := make([]string, 0, len(r.Reasons))
	for name := range r.Reasons {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %d", name, r.Reasons[name]))
	}
	return fmt.Sprintf(" (after the stop signal: %d; %s)", r.AfterStopSignal, strings.Join(parts, ", "))
}

// StopSignalName names a termination's stop signal as the kernel saw it
// ("SIGQUIT"), or "the stop signal" when it was not seen.
func StopSignalName(t correlate.Termination) string {
	if t.Marks.StopSignal.IsZero() {
		return "the stop signal"
	}
	return collector.SignalName(t.StopSignal)
}

// SourcesLine summarises the node-local tasks that connected during a
// termination: "kubelet (probe) 4 refused 2 accepted; envoy 10 accepted".
func SourcesLine(sources []correlate.Source) string {
	parts := make([]string, 0, len(sources))
	for _, s := range sources {
		part := s.Comm
		if s.Probe {
			part += " (probe)"
		}
		if s.Refused > 0 {
			part += fmt.Sprintf(" %d refused", s.Refused)
		}
		if s.Accepted > 0 || s.Refused == 0 {
			part += fmt.Sprintf(" %d accepted", s.Accepted)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
