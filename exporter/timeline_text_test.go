package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

const wantNaiveTimeline = `shop/web-6d4f-a  Deployment web revision 3  node node-1  outcome refused
  uid uid-a  ip 10.244.1.7  grace period 30.000s
  cause rollout (Deployment web moved from revision 3 to 4)
     +0.000s  delete_requested
     +0.000s  killing
     +0.000s  stop_signal          SIGTERM to uvicorn (PID 1)
     +0.010s  deletion_seen
     +0.125s  listener_closed
     +0.250s  endpoints_not_ready
     +0.500s  last_accept
     +2.500s  exit                 exit code 0
     +3.000s  pod_gone
  refused after SIGTERM: 44  killed by SIGKILL: 0  killed at exit: 0  refused before SIGTERM: 0
  in flight at stop signal: 0  accepted after endpoint removal: 3  reset at exit: 0
  reset at shutdown: 0  streams killed by SIGKILL: 0  probe refusals: 0
  reset on reused connections: 0
  connection attempts plotted: 2 accepted, 2 refused, from +0.050s to +1.250s
  routing_lag_observed 1.000s  listener_close_delay 0.125s  prestop_duration 0.000s  drain_duration 2.500s  grace_used 2.500s
  diagnosis no_drain_delay: 44 connections refused after SIGTERM: the listener closed 0.125 s after the stop signal, routing took 1.000 s
    fix: set preStop sleep ≥ 2 s: routing took 1.0 s
`

const wantKilledTimeline = `shop/web-6d4f-b  Deployment web revision 3  node node-1  outcome killed
  uid uid-b  ip 10.244.1.8  grace period 30.000s
     -2.000s  delete_requested
     -1.500s  killing
     -1.500s  endpoints_not_ready
     -1.000s  last_accept
     +0.000s  stop_signal          SIGTERM to java (PID 1)
     +0.000s  listener_closed
    +28.500s  sigkill              SIGKILL
    +30.000s  exit                 exit code 137, killed by SIGKILL
  refused after SIGTERM: 0  killed by SIGKILL: 1  killed at exit: 0  refused before SIGTERM: 0
  in flight at stop signal: 1  accepted after endpoint removal: 0  reset at exit: 0
  reset at shutdown: 0  streams killed by SIGKILL: 0  probe refusals: 0
  reset on reused connections: 0
  routing_lag_observed 0.500s  listener_close_delay 0.000s  prestop_duration 1.500s  drain_duration 30.000s  grace_used 32.000s
  diagnosis requests_killed: 1 request in flight killed by SIGKILL after the 30 s grace period
    fix: raise terminationGracePeriodSeconds above preStop + drain + margin (≥ 35 s)
`

func TestWriteTimelines(t *testing.T) {
	var b strings.Builder
	views := []TerminationView{NewTerminationView(naiveTermination()), NewTerminationView(killedTermination())}
	if err := WriteTimelines(&b, views); err != nil {
		t.Fatal(err)
	}
	if want := wantNaiveTimeline + "\n" + wantKilledTimeline; b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

const wantProbedTimeline = `shop/web-6d4f-p  Deployment web revision 3  node node-1  outcome partial
  uid uid-p  ip 10.244.1.9  grace period 30.000s  partial: daemon_down, probe_unavailable:tcp_send_reset, something_new
     -0.100s  delete_requested
     -0.100s  killing
     +0.000s  stop_signal          SIGQUIT to nginx (PID 1); the API names SIGTERM
     +0.050s  last_accept
     +0.100s  listener_closed
     +0.200s  endpoints_not_ready
     +4.100s  exit                 exit code 0
     +4.900s  pod_gone
  refused after SIGQUIT: 44  killed by SIGKILL: 2  killed at exit: 0  refused before SIGQUIT: 0
  in flight at stop signal: 0  accepted after endpoint removal: 0  reset at exit: 0
  reset at shutdown: 6  streams killed by SIGKILL: 1  probe refusals: 4
  reset on reused connections: 0
  sources: kubelet (probe) 4 refused 2 accepted; envoy 10 accepted
  connection attempts plotted: 1 accepted, 2 refused; probes 0 accepted, 2 refused, from -0.050s to +2.100s
  routing_lag_observed 0.800s  listener_close_delay 0.100s  prestop_duration 0.100s  drain_duration 4.100s  grace_used 4.200s
  diagnosis connections_reset_at_shutdown: 6 connections reset when the listener closed with a full accept queue
    fix: stop accepting only after the endpoint is removed: preStop sleep ≥ 1 s
  diagnosis streams_killed: 1 open stream killed by SIGKILL
    fix: close long-lived streams at the stop signal
  diagnosis stop_signal_mismatch: the runtime sent SIGQUIT, the API names SIGTERM
`

// TestWriteTimelineProbesSourcesResets: the signal the runtime sent names
// the refusal rows, the kubelet's probes, the shutdown's resets, the
// killed streams and the node-local sources have rows of their own.
func TestWriteTimelineProbesSourcesResets(t *testing.T) {
	var b strings.Builder
	if err := WriteTimelines(&b, []TerminationView{NewTerminationView(probedTermination())}); err != nil {
		t.Fatal(err)
	}
	if b.String() != wantProbedTimeline {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), wantProbedTimeline)
	}
}

func TestStopSignalNameUnseen(t *testing.T) {
	tm := probedTermination()
	tm.Marks.StopSignal = time.Time{}
	if got := StopSignalName(tm); got != "the stop signal" {
		t.Errorf("StopSignalName without a stop signal mark = %q", got)
	}
}

// TestWriteTimelineDeath: the exit mark says how the server ended and what
// that killed, and the counts row has the requests killed at exit.
func TestWriteTimelineDeath(t *testing.T) {
	tm := killedTermination()
	tm.Marks.Sigkill, tm.ExitCode, tm.ExitSignal = time.Time{}, 143, 0
	tm.Counts = correlate.Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4}
	tm.Death = correlate.Death{Kind: correlate.DeathStopSignal, Comm: "node", PID: 7, Time: at(2.002), ExitCode: 143, Signal: 15}
	var b strings.Builder
	if err := WriteTimelines(&b, []TerminationView{NewTerminationView(tm)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"exit                 exit code 143; node (pid 7) died of SIGTERM 0.002s after the stop signal (no handler: the signal's default action) with 4 requests in flight\n",
		"killed by SIGKILL: 0  killed at exit: 4  refused before SIGTERM: 0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("timeline lacks %q:\n%s", want, b.String())
		}
	}
}

// Every diagnosis of requests killed at exit has an Event reason of its own.
func TestEventReasonsKilledAtExit(t *testing.T) {
	for code, want := range map[string]string{correlate.DiagStopSignalKills: "DrainStopSignalKillsServer",
		correlate.DiagExitedInflight: "DrainExitedWithRequestsInFlight", correlate.DiagCrashedDuringDrain: "DrainCrashedDuringDrain"} {
		if got := EventReason(code); got != want {
			t.Errorf("EventReason(%s) = %s, want %s", code, got, want)
		}
	}
}

// TestWriteTimelineEscapesClusterStrings: a revision annotation and an
// Event message with escape sequences and newlines reach the terminal
// escaped, each on its own line of the layout.
func TestWriteTimelineEscapesClusterStrings(t *testing.T) {
	term := naiveTermination()
	term.Workload.Revision = "3\x1b[2J\x1b[H"
	term.CauseEvidence = "PreStopHook failed\nshop/web-6d4f-a  outcome clean\u009b"
	var b strings.Builder
	if err := WriteTimelines(&b, []TerminationView{NewTerminationView(term)}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if want := `shop/web-6d4f-a  Deployment web revision 3\x1b[2J\x1b[H  node node-1  outcome refused`; lines[0] != want {
		t.Errorf("header %q, want %q", lines[0], want)
	}
	if want := `  cause rollout (PreStopHook failed\nshop/web-6d4f-a  outcome clean\u009b)`; lines[2] != want {
		t.Errorf("cause %q, want %q", lines[2], want)
	}
	if len(lines) != strings.Count(wantNaiveTimeline, "\n")+1 || strings.ContainsAny(b.String(), "\x1b\u009b") {
		t.Errorf("escaped timeline:\n%s", b.String())
	}
}
