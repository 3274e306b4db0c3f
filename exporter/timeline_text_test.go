package exporter

import (
	"strings"
	"testing"
)

const wantNaiveTimeline = `shop/web-6d4f-a  Deployment web revision 3  node node-1  outcome refused
  uid uid-a  ip 10.244.1.7  grace period 30.000s
     +0.000s  delete_requested
     +0.000s  killing
     +0.000s  stop_signal          SIGTERM to uvicorn (PID 1)
     +0.010s  deletion_seen
     +0.125s  listener_closed
     +0.250s  endpoints_not_ready
     +0.500s  last_accept
     +2.500s  exit                 exit code 0
     +3.000s  pod_gone
  refused after SIGTERM: 44  killed by SIGKILL: 0  refused before SIGTERM: 0
  in flight at stop signal: 0  accepted after endpoint removal: 3  reset at exit: 0
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
  refused after SIGTERM: 0  killed by SIGKILL: 1  refused before SIGTERM: 0
  in flight at stop signal: 1  accepted after endpoint removal: 0  reset at exit: 0
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
