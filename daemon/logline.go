package daemon

import (
	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// logTermination writes the one info line of a finished termination: who,
// the outcome, the counts, the diagnoses and, when partial, why.
func logTermination(log zerolog.Logger, t correlate.Termination) {
	codes := make([]string, 0, len(t.Diagnoses))
	for _, d := range t.Diagnoses {
		codes = append(codes, d.Code)
	}
	ev := log.Info().
		Str("namespace", t.Workload.Namespace).Str("pod", t.Pod).Str("pod_uid", t.PodUID).
		Str("workload_kind", t.Workload.Kind).Str("workload", t.Workload.Name).Str("revision", t.Workload.Revision).
		Str("outcome", t.Outcome).
		Int("refused_after_sigterm", t.Counts.RefusedAfterSigterm).
		Int("refused_before_sigterm", t.Counts.RefusedBeforeSigterm).
		Int("requests_killed_by_sigkill", t.Counts.RequestsKilledBySigkill).
		Int("requests_killed_at_exit", t.Counts.RequestsKilledAtExit).
		Int("inflight_at_stop_signal", t.Counts.InflightAtStopSignal).
		Int("accepted_after_endpoints_not_ready", t.Counts.AcceptedAfterEndpointsNotReady).
		Int("connections_reset_at_exit", t.Counts.ConnectionsResetAtExit).
		Int("connections_reset_at_shutdown", t.Counts.ConnectionsResetAtShutdown).
		Int("requests_reset_on_reused_connections", t.Counts.RequestsResetOnReusedConnections).
		Int("streams_killed_by_sigkill", t.Counts.StreamsKilledBySigkill).
		Int("probe_refused", t.Counts.ProbeRefused).
		Int32("exit_code", t.ExitCode).
		Str("death", t.Death.Kind).
		Strs("diagnoses", codes)
	if len(t.Diagnoses) > 0 {
		ev = ev.Str("diagnosis", t.Diagnoses[0].Message)
		if t.Diagnoses[0].Fix != "" {
			ev = ev.Str("fix", t.Diagnoses[0].Fix)
		}
	}
	if t.Cause != "" {
		ev = ev.Str("cause", t.Cause)
	}
	if t.Container != "" {
		ev = ev.Str("container", t.Container).Str("cause_evidence", t.CauseEvidence)
	}
	if t.StopSignal != 0 {
		ev = ev.Str("stop_signal", collector.SignalName(t.StopSignal))
	}
	if t.StopSignalAPI != 0 && t.StopSignalAPI != t.StopSignal {
		ev = ev.Str("stop_signal_api", collector.SignalName(t.StopSignalAPI))
	}
	if len(t.Sources) > 0 {
		ev = ev.Str("sources", exporter.SourcesLine(t.Sources))
	}
	if t.Partial {
		ev = ev.Bool("partial", true).Strs("partial_reasons", t.PartialReasons)
	}
	ev.Msg("termination complete")
}
