package main

import (
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// oneTermination is a daemon's store: a single termination.
type oneTermination correlate.Termination

func (o oneTermination) Terminations() []correlate.Termination {
	return []correlate.Termination{correlate.Termination(o)}
}

func (o oneTermination) Get(uid string) (correlate.Termination, bool) {
	return correlate.Termination(o), uid == o.PodUID
}

// webTermination is an old pod of shop/web (revision 7) whose listener
// closed 50 ms after the stop signal.
func webTermination(pod string, refused int, stop time.Time) correlate.Termination {
	return correlate.Termination{PodUID: "uid-" + pod, Pod: pod, Node: "node-" + pod, PodIP: netip.MustParseAddr("10.0.0.1"),
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "7"}, GracePeriod: 30 * time.Second,
		Marks:  correlate.Marks{DeleteRequested: stop.Add(-time.Second), Killing: stop.Add(-time.Second), StopSignal: stop, ListenerClosed: stop.Add(50 * time.Millisecond), Exit: stop.Add(time.Second)},
		Counts: correlate.Counts{RefusedAfterSigterm: refused}, Outcome: "refused", Complete: true,
		Diagnoses: []correlate.Diagnosis{{Code: "no_drain_delay", Message: "the listener closed 0.050s after the stop signal", Fix: "add preStop sleep ≥ 2s"}}}
}

func daemonWith(t *testing.T, pod string, refused int, stop time.Time) *httptest.Server {
	t.Helper()
	return serveDaemon(t, webTermination(pod, refused, stop), nil)
}

// serveDaemon is a daemon's API holding one termination and startups.
func serveDaemon(t *testing.T, term correlate.Termination, startups startupList) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(exporter.NewServer(exporter.ServerConfig{Source: oneTermination(term), Startups: startups, Log: zerolog.Nop()}).Handler())
	t.Cleanup(s.Close)
	return s
}

// wantWebATimeline is webTermination("web-a", 44, ...)'s timeline.
const wantWebATimeline = `shop/web-a  Deployment web revision 7  node node-web-a  outcome refused
  uid uid-web-a  ip 10.0.0.1  grace period 30.000s
     -1.000s  delete_requested
     -1.000s  killing
     +0.000s  stop_signal          SIGTERM to the container's init (PID 1)
     +0.050s  listener_closed
     +1.000s  exit                 exit code 0
  refused after SIGTERM: 44  killed by SIGKILL: 0  killed at exit: 0  refused before SIGTERM: 0
  in flight at stop signal: 0  accepted after endpoint removal: 0  reset at exit: 0
  reset at shutdown: 0  streams killed by SIGKILL: 0  probe refusals: 0
  reset on reused connections: 0
  listener_close_delay 0.050s  prestop_duration 1.000s  drain_duration 1.000s  grace_used 2.000s
  diagnosis no_drain_delay: the listener closed 0.050s after the stop signal
    fix: add preStop sleep ≥ 2s
`

func TestTimelineAcrossDaemons(t *testing.T) {
	base := time.Now().Add(-10 * time.Minute)
	a, b := daemonWith(t, "web-b", 3, base.Add(time.Minute)), daemonWith(t, "web-a", 44, base)
	var out, errOut strings.Builder
	code := timelineCmd([]string{"--url", a.URL + "," + b.URL, "--workload", "web", "--since", "1h"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := wantWebATimeline
	if !strings.HasPrefix(out.String(), want+"\nshop/web-b ") {
		t.Errorf("output:\n%s\nwant it to start with:\n%s", out.String(), want)
	}
}

func TestTimelineJSONAndFilters(t *testing.T) {
	s := daemonWith(t, "web-a", 44, time.Now().Add(-2*time.Hour))
	var out, errOut strings.Builder
	if code := timelineCmd([]string{"--url", s.URL, "--format", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var list exporter.TerminationList
	if err := json.Unmarshal([]byte(out.String()), &list); err != nil || len(list.Terminations) != 1 ||
		list.Terminations[0].Counts.RefusedAfterSigterm != 44 || list.Terminations[0].Durations["drain_duration"] != 1 {
		t.Fatalf("json %v: %s", err, out.String())
	}
	out.Reset()
	if code := timelineCmd([]string{"--url", s.URL, "--since", "1h"}, &out, &errOut); code != 0 ||
		out.String() != "no termination matches\n\nNew pods (startups)\n\nno startup matches\n" {
		t.Errorf("--since 1h: exit %d, output %q", code, out.String())
	}
	if code := timelineCmd([]string{"--url", "http://127.0.0.1:1"}, &out, &errOut); code != 1 {
		t.Errorf("unreachable daemon: exit %d, want 1", code)
	}
	if code := timelineCmd([]string{"--format", "xml"}, &out, &errOut); code != 2 {
		t.Errorf("--format xml: exit %d, want 2", code)
	}
}
