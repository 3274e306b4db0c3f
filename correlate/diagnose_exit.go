package correlate

import (
	"fmt"

	"github.com/drainwatch/drainwatch/collector"
)

// killedAtExit diagnoses requests killed in flight by an exit other than
// SIGKILL's, by how the server ended (death.go): it stopped at the stop
// signal without draining, it ran a shutdown that ended before its
// requests, or it crashed. A container termination that is a crash
// already has container_crashed, with the count.
func killedAtExit(t Termination, restart *Diagnosis) *Diagnosis {
	if t.Counts.RequestsKilledAtExit == 0 {
		return nil
	}
	switch t.Death.Kind {
	case DeathStopSignal, DeathNoDrain:
		return stopSignalKills(t)
	case DeathCrash:
		if restart != nil && restart.Code == DiagContainerCrashed {
			return nil
		}
		return crashedDuringDrain(t)
	}
	return exitedInflight(t)
}

// stopSignalKills: the server died of the stop signal, or exited at it,
// with its listener open until the exit: nothing drained.
func stopSignalKills(t Termination) *Diagnosis {
	sig := collector.SignalName(t.StopSignal)
	return &Diagnosis{Code: DiagStopSignalKills,
		Message: DeathText(t) + ": nothing kept it serving or let its requests finish",
		Fix: fmt.Sprintf("handle %s: keep serving through the drain delay, then stop accepting and finish in-flight requests before exiting "+
			"(Go: signal.Notify and http.Server.Shutdown; Node.js: process.on('%s') and server.close())", sig, sig)}
}

// exitedInflight: the server exited by itself with requests in flight,
// after its own shutdown began (its timeout shorter than the longest
// request), or without a stop signal.
func exitedInflight(t Termination) *Diagnosis {
	msg, fix := DeathText(t), "let the server finish its requests before it exits"
	if t.Death.Kind == DeathAfterShutdown {
		msg += ": its shutdown ended before its requests did"
		fix = "raise the server's shutdown timeout above its longest request"
		if t.GracePeriod > 0 {
			fix += fmt.Sprintf(", within the grace period of %s (preStop + drain delay + shutdown timeout + margin)", FormatSeconds(t.GracePeriod))
		}
	}
	return &Diagnosis{Code: DiagExitedInflight, Message: msg, Fix: fix}
}

// crashedDuringDrain: the server crashed during the termination, cutting
// its requests in flight.
func crashedDuringDrain(t Termination) *Diagnosis {
	return &Diagnosis{Code: DiagCrashedDuringDrain, Message: DeathText(t),
		Fix: "read why it crashed (kubectl logs --previous: a panic, a fatal error, a signal in the shutdown path) and fix it; " +
			"every request in flight is lost with the process"}
}
