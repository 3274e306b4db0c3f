package correlate

import (
	"fmt"
	"math"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Outcome label values of drainwatch_terminations_total: what the
// termination cost in traffic. A bounded set; risks without loss are
// diagnoses, not outcomes.
const (
	OutcomeClean            = "clean"              // nothing lost, complete view
	OutcomeRefused          = "refused"            // connections refused (before or after the stop signal)
	OutcomeKilled           = "killed"             // requests killed in flight, by SIGKILL or at an exit
	OutcomeRefusedAndKilled = "refused_and_killed" // both
	OutcomeBlackholed       = "blackholed"         // no refusal or kill, but connections sent after the pod's network was gone
	OutcomeReset            = "reset"              // only connections reset: by the shutdown, on reuse, or at the exit
	OutcomePartial          = "partial"            // nothing lost as far as the incomplete view shows
)

// Outcomes lists every Outcome value, for metrics initialisation and docs.
func Outcomes() []string {
	return []string{OutcomeClean, OutcomeRefused, OutcomeKilled, OutcomeRefusedAndKilled, OutcomeBlackholed, OutcomeReset, OutcomePartial}
}

// outcomeOf names the loss first: a partial view still proves what it saw.
func outcomeOf(t Termination) string {
	refused := t.Counts.RefusedAfterSigterm+t.Counts.RefusedBeforeSigterm+t.Counts.RefusedInsidePod > 0
	killed := t.Counts.RequestsKilledBySigkill+t.Counts.RequestsKilledAtExit > 0
	switch {
	case refused && killed:
		return OutcomeRefusedAndKilled
	case refused:
		return OutcomeRefused
	case killed:
		return OutcomeKilled
	case t.Counts.ConnectionsBlackholed > 0:
		return OutcomeBlackholed
	case t.Counts.ConnectionsResetAtShutdown+t.Counts.RequestsResetOnReusedConnections+t.Counts.ConnectionsResetAtExit > 0:
		return OutcomeReset
	case t.Partial:
		return OutcomePartial
	}
	return OutcomeClean
}

// diagnose lists the findings about t in a fixed order; clean only when
// nothing else was found and the view is complete.
func diagnose(t Termination, prestopMessage string, cfg Config) []Diagnosis {
	var ds []Diagnosis
	ignored := stopSignalIgnored(t)
	routing := listenerClosedEarly(t, cfg)
	drainDelay := noDrainDelay(t, cfg)
	killed := requestsKilled(t, ignored)
	restart := containerStopped(t)
	if restart != nil {
		// No deletion, no routing to converge: the pod stays in its
		// Service, so a preStop sleep is not the fix.
		routing, drainDelay = nil, nil
	}
	if t.Cause == CauseOOMKill {
		killed = nil // no grace period to raise: oom_killed has the count and the fix
	}
	exceeded := nodeFix(t, graceExceeded(t, ignored))
	killed = nodeFix(t, killed)
	for _, d := range []*Diagnosis{
		restart, routing, refusedInsidePod(t, cfg), blackholed(t, cfg), drainDelay, ignoredDiagnosis(t, ignored),
		exceeded, killed, killedAtExit(t, restart), streamsKilled(t), shutdownResets(t), resetAtExit(t), resetOnReuse(t),
		prestopFailed(t, prestopMessage), budgetTooSmall(t, ignored, cfg), stopSignalMismatch(t),
	} {
		if d != nil {
			ds = append(ds, *d)
		}
	}
	if len(ds) == 0 && !t.Partial {
		ds = append(ds, Diagnosis{Code: DiagClean, Message: fmt.Sprintf(
			"no connection lost: %d accepted after the endpoint became not ready, exit code %d",
			t.Counts.AcceptedAfterEndpointsNotReady, t.ExitCode)})
	}
	return ds
}

func listenerClosedEarly(t Termination, cfg Config) *Diagnosis {
	n := t.Counts
	if n.RefusedAfterSigterm+n.RefusedBeforeSigterm == 0 {
		return nil
	}
	listener, to := "the listener", ""
	if l, ok := t.ServingListener(); ok && l.Container != "" {
		listener, to = fmt.Sprintf("container %s's listener :%d", l.Container, l.Port), " to container "+l.Container
	}
	closed := listener + " was never seen closing"
	if rel := relative(deletionRef(t), t.Marks.ListenerClosed, deletionRefName(t)); rel != "" {
		closed = listener + " closed " + rel
	}
	d := &Diagnosis{Code: DiagListenerClosedEarly,
		Message: fmt.Sprintf("%d connections refused (%d after the stop signal, %d before it): %s",
			n.RefusedAfterSigterm+n.RefusedBeforeSigterm, n.RefusedAfterSigterm, n.RefusedBeforeSigterm, closed),
		Fix: fmt.Sprintf("add preStop sleep ≥ %ds%s", sleepFor(0, cfg), to)}
	if took, ok := routingTook(t); ok {
		d.Message += fmt.Sprintf(" while routing still sent traffic until %s after %s", FormatSeconds(took), deletionRefName(t))
		d.Fix = fmt.Sprintf("add preStop sleep ≥ %ds%s: routing took %s%s", sleepFor(took, cfg), to, FormatSeconds(took), slowestText(t))
	}
	return d
}

// ServingListener is the close of a pod of several containers that set
// listener_closed: the last listener its clients reached.
func (t Termination) ServingListener() (ListenerClose, bool) {
	for _, l := range t.Listeners {
		if !l.Inner && l.At.Equal(t.Marks.ListenerClosed) {
			return l, true
		}
	}
	return ListenerClose{}, false
}

// refusedInsidePod: a container of the pod (a sidecar proxy) kept
// forwarding over loopback to another whose listener had closed. The fix
// is the backend's: it must keep listening until the proxy in front of it
// stops forwarding (the last refusal inside).
func refusedInsidePod(t Termination, cfg Config) *Diagnosis {
	n := t.Counts.RefusedInsidePod
	if n == 0 {
		return nil
	}
	var last time.Time
	ports := ""
	for i, pc := range t.RefusedInsidePorts {
		last = later(last, pc.Last)
		if i > 0 {
			ports += ", "
		}
		ports += fmt.Sprintf(":%d", pc.Port)
		if c := innerContainer(t, pc.Port); c != "" {
			ports += " (container " + c + ")"
		}
	}
	d := &Diagnosis{Code: DiagRefusedInsidePod,
		Message: fmt.Sprintf("%d connections refused inside the pod at %s: a container in front of it (a sidecar proxy) still forwarded after its listener closed; each was a request the proxy failed or retried", n, ports),
		Fix:     "keep the backend container listening until the proxy in front of it has drained"}
	to := ""
	if c := innerContainer(t, t.RefusedInsidePorts[0].Port); c != "" {
		to = " to container " + c
	}
	if start := deletionRef(t); !start.IsZero() && last.After(start) {
		took := last.Sub(start)
		d.Message += fmt.Sprintf(", the last %s after %s", FormatSeconds(took), deletionRefName(t))
		d.Fix = fmt.Sprintf("add preStop sleep ≥ %ds%s: the proxy forwarded to it until %s after %s", sleepFor(took, cfg), to, FormatSeconds(took), deletionRefName(t))
	}
	return d
}

// innerContainer names the container whose listener on port closed
// during the termination, "" when none is known.
func innerContainer(t Termination, port uint16) string {
	for _, l := range t.Listeners {
		if l.Port == port && l.Container != "" {
			return l.Container
		}
	}
	return ""
}

// blackholed: connections sent after the pod's network was gone. The
// sleep covers until the last drop after the deletion, an upper bound of
// the last SYN (see Termination.LastBlackholed).
func blackholed(t Termination, cfg Config) *Diagnosis {
	n := t.Counts.ConnectionsBlackholed
	if n == 0 {
		return nil
	}
	d := &Diagnosis{Code: DiagBlackholed,
		Message: fmt.Sprintf("%d connections sent after the pod's network was gone were dropped by the node (clients time out)", n),
		Fix:     fmt.Sprintf("add preStop sleep ≥ %ds", sleepFor(0, cfg))}
	if start := deletionRef(t); !start.IsZero() && t.LastBlackholed.After(start) {
		took := t.LastBlackholed.Sub(start)
		d.Message += ", the last " + t.LastBlackholedAfter()
		d.Fix = fmt.Sprintf("add preStop sleep ≥ %ds: routing still sent %s", sleepFor(took, cfg), t.LastBlackholedAfter())
	}
	return d
}

func noDrainDelay(t Termination, cfg Config) *Diagnosis {
	m := t.Marks
	start := deletionRef(t)
	// Only a pod that routing sends traffic to needs the delay: one behind
	// a Service, or one that refused connections.
	routed := !m.EndpointsNotReady.IsZero() || t.Counts.RefusedAfterSigterm+t.Counts.RefusedBeforeSigterm+t.Counts.ConnectionsBlackholed > 0
	if !routed || m.ListenerClosed.IsZero() || start.IsZero() || m.ListenerClosed.Sub(start) >= cfg.MinDrainDelay {
		return nil
	}
	took, ok := routingTook(t)
	if !ok {
		took = cfg.MinDrainDelay
	}
	listener, to := "the listener", ""
	if l, ok := t.ServingListener(); ok && l.Container != "" {
		listener, to = fmt.Sprintf("container %s's listener :%d", l.Container, l.Port), " to container "+l.Container
	}
	return &Diagnosis{Code: DiagNoDrainDelay,
		Message: fmt.Sprintf("%s closed %s: nothing kept the pod serving while routing converged",
			listener, relative(start, m.ListenerClosed, deletionRefName(t))),
		Fix: fmt.Sprintf("add preStop sleep ≥ %ds%s or keep serving that long after the stop signal%s", sleepFor(took, cfg), to, slowestText(t))}
}

// stopSignalIgnored: the stop signal was generated and nothing reacted —
// no listener closed, no init exited — until SIGKILL.
func stopSignalIgnored(t Termination) bool {
	m := t.Marks
	before := func(x time.Time) bool { return !x.IsZero() && x.Before(m.Sigkill) }
	return !m.StopSignal.IsZero() && m.Sigkill.After(m.StopSignal) && !before(m.ListenerClosed) && !before(m.Exit)
}

func ignoredDiagnosis(t Termination, ignored bool) *Diagnosis {
	if !ignored {
		return nil
	}
	target := clause(" (", t.StopSignalTarget)
	if target != "" {
		target += ")"
	}
	return &Diagnosis{Code: DiagStopSignalIgnored,
		Message: fmt.Sprintf("%s to PID 1%s had no effect for %s until SIGKILL: no listener closed, no exit",
			collector.SignalName(t.StopSignal), target, FormatSeconds(t.Marks.Sigkill.Sub(t.Marks.StopSignal))),
		Fix: "PID 1 ignores signals it has no handler for: exec the server from the shell (exec ./server), run an init such as tini, or handle the signal"}
}

func graceExceeded(t Termination, ignored bool) *Diagnosis {
	m := t.Marks
	if m.Sigkill.IsZero() || ignored {
		return nil
	}
	return &Diagnosis{Code: DiagGraceExceeded,
		Message: fmt.Sprintf("still running when the grace period of %s ran out%s",
			FormatSeconds(t.GracePeriod), clause(": SIGKILL ", relative(m.StopSignal, m.Sigkill, "the stop signal"))),
		Fix: fmt.Sprintf("finish the drain within the grace period or raise terminationGracePeriodSeconds above %s", FormatSeconds(t.GracePeriod))}
}

func requestsKilled(t Termination, ignored bool) *Diagnosis {
	n := t.Counts.RequestsKilledBySigkill
	if n == 0 {
		return nil
	}
	fix := "raise terminationGracePeriodSeconds above preStop + the longest request, or bound requests below the remaining grace"
	if ignored {
		fix = "make the server receive the stop signal so in-flight requests can finish"
	}
	msg := fmt.Sprintf("SIGKILL%s killed %d in-flight requests",
		clause(" ", relative(t.Marks.StopSignal, t.Marks.Sigkill, "the stop signal")), n)
	if !t.Marks.StopSignal.IsZero() {
		msg += fmt.Sprintf(" (%d were in flight at the stop signal)", t.Counts.InflightAtStopSignal)
	}
	return &Diagnosis{Code: DiagRequestsKilled, Message: msg, Fix: fix}
}

func prestopFailed(t Termination, message string) *Diagnosis {
	m := t.Marks
	if m.PrestopFailed.IsZero() {
		return nil
	}
	msg := fmt.Sprintf("the preStop hook failed%s (kubelet: %q)",
		clause(" ", relative(m.Killing, m.PrestopFailed, "Killing")), message)
	if !m.StopSignal.IsZero() {
		msg += "; the stop signal followed at once"
	}
	return &Diagnosis{Code: DiagPrestopFailed, Message: msg,
		Fix: "check that the preStop command exists in the image, or use the preStop sleep action"}
}

// budgetTooSmall: observed preStop + drain + margin do not fit in the
// grace period. A drain cut by SIGKILL is a lower bound, so it still counts.
func budgetTooSmall(t Termination, ignored bool, cfg Config) *Diagnosis {
	m := t.Marks
	if ignored || t.GracePeriod <= 0 || m.StopSignal.IsZero() || m.Exit.IsZero() {
		return nil
	}
	var prestop time.Duration
	if !m.Killing.IsZero() && m.StopSignal.After(m.Killing) {
		prestop = m.StopSignal.Sub(m.Killing)
	}
	drain := m.Exit.Sub(m.StopSignal)
	need := prestop + drain + cfg.BudgetMargin
	if need <= t.GracePeriod {
		return nil
	}
	return &Diagnosis{Code: DiagBudgetTooSmall,
		Message: fmt.Sprintf("preStop %s + drain %s + margin %s = %s > grace period %s",
			FormatSeconds(prestop), FormatSeconds(drain), FormatSeconds(cfg.BudgetMargin), FormatSeconds(need), FormatSeconds(t.GracePeriod)),
		Fix: fmt.Sprintf("set terminationGracePeriodSeconds ≥ %d", int(math.Ceil(need.Seconds())))}
}

// streamsKilled: open HTTP/2 or gRPC streams cut by SIGKILL. A stream that
// never ends by itself ends only when the server ends it.
func streamsKilled(t Termination) *Diagnosis {
	n := t.Counts.StreamsKilledBySigkill
	if n == 0 {
		return nil
	}
	return &Diagnosis{Code: DiagStreamsKilled,
		Message: fmt.Sprintf("SIGKILL cut %d open streams (HTTP/2 or gRPC) the server had not ended", n),
		Fix:     "end long-lived streams at the stop signal (gRPC GracefulStop with a deadline, HTTP/2 GOAWAY) well within the grace period; clients reconnect"}
}

// shutdownResets: connections the shutdown itself reset while the server
// was alive.
func shutdownResets(t Termination) *Diagnosis {
	n := t.Counts.ConnectionsResetAtShutdown
	if n == 0 {
		return nil
	}
	return &Diagnosis{Code: DiagShutdownResets,
		Message: fmt.Sprintf("the shutdown reset %d connections while the server was alive: accepted but not yet served when the listener closed, or closed with a request unanswered", n),
		Fix:     "keep accepting until routing has converged (preStop sleep), then stop accepting and answer every request already accepted before closing its connection (e.g. Go's http.Server.Shutdown)"}
}

// resetAtExit: the exit reset connections nothing had answered yet, which
// their clients see as a reset: accepted by the kernel but still in the
// listener's accept queue (the listener was open at the exit: the server
// never stopped accepting), or with request bytes the server never read.
// When the exit also killed requests, their diagnosis names the cause and
// the fix for both.
func resetAtExit(t Termination) *Diagnosis {
	n := t.Counts.ConnectionsResetAtExit
	if n == 0 || t.Counts.RequestsKilledBySigkill+t.Counts.RequestsKilledAtExit > 0 {
		return nil
	}
	return &Diagnosis{Code: DiagResetAtExit,
		Message: fmt.Sprintf("the exit reset %d connections nothing had answered: still in the listener's accept queue, or with request bytes never read", n),
		Fix:     "handle the stop signal: serve through the drain delay, then close the listener and answer what it accepted before exiting (e.g. Go's http.Server.Shutdown)"}
}

// stopSignalMismatch: the runtime sent another signal than the one the API
// names (an image STOPSIGNAL overridden, a runtime that ignores
// lifecycle.stopSignal).
func stopSignalMismatch(t Termination) *Diagnosis {
	if t.StopSignalAPI == 0 || t.StopSignal == 0 || t.StopSignalAPI == t.StopSignal {
		return nil
	}
	return &Diagnosis{Code: DiagStopSignalMismatch,
		Message: fmt.Sprintf("the container received %s as its stop signal, but the API names %s",
			collector.SignalName(t.StopSignal), collector.SignalName(t.StopSignalAPI)),
		Fix: "check the runtime's stop-signal precedence (lifecycle.stopSignal > image STOPSIGNAL > SIGTERM) and that the server handles the signal it actually gets"}
}
