package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

var web4 = collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "4"}

// readyBeforeListening is a new pod whose readiness probe (on 9090) passed
// 2.5 s before what serves 8080 listened: 39 clients refused after Ready.
func readyBeforeListening() StartupView {
	return StartupView{Daemon: "http://node-1:9090", Startup: correlate.Startup{PodUID: "uid-new-a", Namespace: "shop", Pod: "web-7f9c-a",
		Workload: web4, Window: time.Minute, Complete: true, NetnsBound: true,
		Marks: correlate.StartupMarks{Created: at(0), ContainerStarted: at(1.2), FirstListener: at(1.3), Ready: at(1.5),
			FirstAccept: at(4.1), WindowEnd: at(61.5)},
		Counts:             correlate.StartupCounts{RefusedBeforeReady: 2, RefusedAfterReady: 39, ResetAfterReady: 1, ProbeRefused: 3},
		ReadyToFirstAccept: 2600 * time.Millisecond,
		Listeners:          []correlate.PortMark{{Port: 9090, At: at(1.3)}, {Port: 8080, At: at(4)}},
		RefusedPorts:       []uint16{8080},
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagReadyBeforeListening,
			Message: "39 connection attempts refused after the pod was Ready: port 8080 listened 2.5s after Ready",
			Fix:     "point the readiness probe at the port that serves the traffic, or add a startupProbe that passes only once it listens"}}}}
}

// startupsOfARollout are the other ends of a window: deleted before Ready
// (partial), deleted after Ready, and one in progress.
func startupsOfARollout() []StartupView {
	neverReady := correlate.Startup{PodUID: "uid-new-b", Namespace: "shop", Pod: "web-7f9c-b", Workload: web4, Window: time.Minute, Complete: true,
		Marks:   correlate.StartupMarks{Created: at(10), ContainerStarted: at(11), WindowEnd: at(20)},
		Counts:  correlate.StartupCounts{RefusedBeforeReady: 7},
		Partial: true, PartialReasons: []string{correlate.StartupNetnsNotBound, correlate.StartupEventsLost}}
	deleted := correlate.Startup{PodUID: "uid-new-d", Namespace: "shop", Pod: "web-7f9c-d", Workload: web4, Window: time.Minute, Complete: true,
		Marks: correlate.StartupMarks{Created: at(40), ContainerStarted: at(40.5), FirstListener: at(41), Ready: at(42),
			FirstAccept: at(42.2), WindowEnd: at(50)},
		ReadyToFirstAccept: 200 * time.Millisecond, Listeners: []correlate.PortMark{{Port: 8080, At: at(41)}}}
	starting := correlate.Startup{PodUID: "uid-new-c", Namespace: "shop", Pod: "web-7f9c-c", Workload: web4, Window: time.Minute,
		Marks: correlate.StartupMarks{Created: at(30), ContainerStarted: at(30.8)}}
	return []StartupView{readyBeforeListening(), {Startup: neverReady, Daemon: "http://node-2:9090"},
		{Startup: deleted, Daemon: "drainwatch/drainwatch-x7k2p"}, {Startup: starting, Daemon: "http://node-1:9090"}}
}

const wantStartups = `shop/web-7f9c-a  Deployment web revision 4  daemon http://node-1:9090  complete
  uid uid-new-a  window 60.000s
     +0.000s  created
     +1.200s  container_started
     +1.300s  first_listener       port 9090
     +1.500s  ready
     +4.100s  first_accept
    +61.500s  window_end           ready + 60s
  refused before ready: 2  refused after ready: 39  reset after ready: 1  probe refusals: 3
  ready_to_first_accept 2.600s
  refused after ready on ports: 8080
  diagnosis ready_before_listening: 39 connection attempts refused after the pod was Ready: port 8080 listened 2.5s after Ready
    fix: point the readiness probe at the port that serves the traffic, or add a startupProbe that passes only once it listens

shop/web-7f9c-b  Deployment web revision 4  daemon http://node-2:9090  complete
  uid uid-new-b  window 60.000s  partial: netns_not_bound, events_lost
     +0.000s  created
     +1.000s  container_started
    +10.000s  window_end           the deletion, before Ready
  refused before ready: 7  refused after ready: 0  reset after ready: 0  probe refusals: 0

shop/web-7f9c-d  Deployment web revision 4  daemon drainwatch/drainwatch-x7k2p  complete
  uid uid-new-d  window 60.000s
     +0.000s  created
     +0.500s  container_started
     +1.000s  first_listener       port 8080
     +2.000s  ready
     +2.200s  first_accept
    +10.000s  window_end           the deletion, before ready + 60s
  refused before ready: 0  refused after ready: 0  reset after ready: 0  probe refusals: 0
  ready_to_first_accept 0.200s

shop/web-7f9c-c  Deployment web revision 4  daemon http://node-1:9090  in progress
  uid uid-new-c  window 60.000s
     +0.000s  created
     +0.800s  container_started
  refused before ready: 0  refused after ready: 0  reset after ready: 0  probe refusals: 0
`

func TestWriteStartups(t *testing.T) {
	var b strings.Builder
	if err := WriteStartups(&b, startupsOfARollout()); err != nil {
		t.Fatal(err)
	}
	if b.String() != wantStartups {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), wantStartups)
	}
}

// TestWriteStartupsRelativeToReady: a record without its creation time
// (none seen) counts its marks from Ready.
func TestWriteStartupsRelativeToReady(t *testing.T) {
	v := readyBeforeListening()
	v.Marks.Created, v.Diagnoses, v.RefusedPorts = time.Time{}, nil, nil
	var b strings.Builder
	if err := WriteStartups(&b, []StartupView{v}); err != nil {
		t.Fatal(err)
	}
	want := `shop/web-7f9c-a  Deployment web revision 4  daemon http://node-1:9090  complete
  uid uid-new-a  window 60.000s
     -0.300s  container_started
     -0.200s  first_listener       port 9090
     +0.000s  ready
     +2.600s  first_accept
    +60.000s  window_end           ready + 60s
  refused before ready: 2  refused after ready: 39  reset after ready: 1  probe refusals: 3
  ready_to_first_accept 2.600s
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestWriteStartupsEscapesClusterStrings: a pod name's escape sequence
// and a revision's newline cannot drive the terminal or forge a line.
func TestWriteStartupsEscapesClusterStrings(t *testing.T) {
	v := readyBeforeListening()
	v.Pod, v.Workload.Revision = "web-1\x1b]0;owned\x07", "4\nforged"
	var b strings.Builder
	if err := WriteStartups(&b, []StartupView{v}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(b.String(), "\n")
	if want := `shop/web-1\x1b]0;owned\a  Deployment web revision 4\nforged  daemon http://node-1:9090  complete`; first != want {
		t.Errorf("header %q, want %q", first, want)
	}
}
