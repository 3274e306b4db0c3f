package exporter

import (
	"strings"

	"github.com/drainwatch/drainwatch/correlate"
)

// partialReasons is the bounded set of the terminations_partial_total
// reason label: the correlator's own reasons and the kernel gaps the daemon
// reports. A reason with a detail after a colon ("probe_unavailable:tcp_
// send_reset", "probe_fallback:refused") is reported without it; anything
// else is "other". probe_fallback is a value of its own: on a kernel whose
// fallback probe loses events (5.10's refused), every termination has it.
var partialReasons = []string{
	correlate.PartialStartedLate,
	correlate.PartialNoStopSignal,
	correlate.PartialNoExit,
	correlate.PartialAcceptHistory,
	correlate.PartialHostNetwork,
	correlate.PartialNetnsUnbound,
	correlate.PartialEarlyOverflow,
	correlate.PartialAPIBlind,
	"events_lost",
	"daemon_down",
	"probe_unavailable",
	"probe_fallback",
	"conn_tracking_full",
	"loss_counters_unreadable",
	"other",
}

var partialReasonSet = set(partialReasons...)

// PartialReasons returns the values of the reason label of
// drainwatch_terminations_partial_total, in a fixed order.
func PartialReasons() []string { return append([]string(nil), partialReasons...) }

// partialLabel bounds a partial reason to the documented values.
func partialLabel(reason string) string {
	reason, _, _ = strings.Cut(reason, ":")
	if partialReasonSet[reason] {
		return reason
	}
	return "other"
}

// partialLabels are the distinct reason labels of a partial termination:
// two reasons that bound to the same label count once.
func partialLabels(t correlate.Termination) []string {
	if !t.Partial {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range t.PartialReasons {
		if l := partialLabel(r); !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		out = append(out, "other")
	}
	return out
}
