package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// startupList is a daemon's startups.
type startupList []correlate.Startup

func (l startupList) Startups() []correlate.Startup { return l }

// newWebPod is a new pod of shop/web (revision 8) created at created, whose
// readiness probe (on 9090) passed before 8080 listened: 39 clients refused
// after Ready.
func newWebPod(pod string, created time.Time) correlate.Startup {
	after := func(ms int) time.Time { return created.Add(time.Duration(ms) * time.Millisecond) }
	return correlate.Startup{PodUID: "uid-" + pod, Namespace: "shop", Pod: pod, Window: time.Minute, Complete: true, NetnsBound: true,
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "8"},
		Marks: correlate.StartupMarks{Created: created, ContainerStarted: after(1200), FirstListener: after(1300), Ready: after(1500),
			FirstAccept: after(4100), WindowEnd: after(61500)},
		Counts:             correlate.StartupCounts{RefusedBeforeReady: 2, RefusedAfterReady: 39, ResetAfterReady: 1, ProbeRefused: 3},
		ReadyToFirstAccept: 2600 * time.Millisecond,
		Listeners:          []correlate.PortMark{{Port: 9090, At: after(1300)}, {Port: 8080, At: after(4000)}},
		RefusedPorts:       []uint16{8080},
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagReadyBeforeListening,
			Message: "39 connection attempts refused after the pod was Ready: port 8080 listened 2.5s after Ready",
			Fix:     "point the readiness probe at the port that serves the traffic, or add a startupProbe that passes only once it listens"}}}
}

// wantWebBStartup is newWebPod("web-b", ...)'s block, asked from daemon.
func wantWebBStartup(daemon string) string {
	return `shop/web-b  Deployment web revision 8  daemon ` + daemon + `  complete
  uid uid-web-b  window 60.000s
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
`
}

// rolloutAPI holds both ends of shop/web's rollout from revision 7 to 8
// (the old pod web-a, the new pod web-b) and a new pod of another
// namespace.
func rolloutAPI(stop time.Time) http.Handler {
	other := newWebPod("api-x", stop.Add(30*time.Second))
	other.Workload.Namespace, other.Namespace = "other", "other"
	return exporter.NewServer(exporter.ServerConfig{Source: oneTermination(webTermination("web-a", 44, stop)),
		Startups: startupList{newWebPod("web-b", stop.Add(-time.Minute)), other}, Log: zerolog.Nop()}).Handler()
}

func rolloutDaemon(t *testing.T, stop time.Time) *httptest.Server {
	s := httptest.NewServer(rolloutAPI(stop))
	t.Cleanup(s.Close)
	return s
}

// TestTimelineShowsStartups: after the terminations, the text lists the
// startups the same filters select, under a heading of their own.
func TestTimelineShowsStartups(t *testing.T) {
	s := rolloutDaemon(t, time.Now().Add(-10*time.Minute))
	const heading = "\nNew pods (startups)\n\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "shop", "--workload", "web", "--since", "1h"}, wantWebATimeline + heading + wantWebBStartup(s.URL)},
		{[]string{"-n", "shop", "--revision", "8"}, "no termination matches\n" + heading + wantWebBStartup(s.URL)},
		{[]string{"--pod", "web-a"}, wantWebATimeline + heading + "no startup matches\n"},
		{[]string{"--since", "1m"}, "no termination matches\n" + heading + "no startup matches\n"},
		{[]string{"-n", "shop", "--startups=false"}, wantWebATimeline},
	} {
		var out, errOut strings.Builder
		code := timelineCmd(append([]string{"--url", s.URL}, c.args...), &out, &errOut)
		if code != 0 || out.String() != c.want || errOut.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, output:\n%s\nwant 0, no stderr:\n%s", c.args, code, errOut.String(), out.String(), c.want)
		}
	}
}

// TestTimelineStartupsWide: a line per startup under the terminations'
// table, its marks relative to its creation.
func TestTimelineStartupsWide(t *testing.T) {
	stop := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := rolloutDaemon(t, stop)
	var out, errOut strings.Builder
	if code := timelineCmd([]string{"--url", s.URL, "-n", "shop", "-o", "wide"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	want := [][]string{
		strings.Split(wideHeader, "\t"),
		{"shop", "web-a", "Deployment/web", "7", "node-web-a", "2026-03-04T05:06:06Z", "refused", "44", "0", "0", "0", "0", "true"},
		{},
		strings.Split(wideStartupsHeader, "\t"),
		{"shop", "web-b", "Deployment/web", "8", s.URL, "2026-03-04T05:05:07Z", "+1.500s", "2.600s", "2", "39", "1", "3", "ready_before_listening", "true"},
		{},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, line := range lines {
		if got := strings.Fields(line); !slices.Equal(got, want[i]) {
			t.Errorf("line %d: %q, want %q", i+1, got, want[i])
		}
	}
}

// timelineDoc is `drainwatch timeline -o json|yaml`'s document.
type timelineDoc struct {
	Terminations []exporter.TerminationView `json:"terminations"`
	Startups     []exporter.StartupView     `json:"startups"`
}

// TestTimelineStartupsJSONAndYAML: one object, the terminations field as
// before and the startups beside it, each with the daemon that answered;
// with --startups=false, no startups field and no startups request.
func TestTimelineStartupsJSONAndYAML(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	api := rolloutAPI(time.Now().Add(-10 * time.Minute))
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		api.ServeHTTP(w, r)
	}))
	defer s.Close()
	for _, c := range []struct {
		args   []string
		fields string
		paths  []string
	}{
		{[]string{"-o", "json"}, "startups,terminations", []string{"/api/v1/terminations", "/api/v1/startups"}},
		{[]string{"-o", "yaml"}, "startups,terminations", []string{"/api/v1/terminations", "/api/v1/startups"}},
		{[]string{"-o", "json", "--startups=false"}, "terminations", []string{"/api/v1/terminations"}},
	} {
		paths = nil
		var out, errOut strings.Builder
		if code := timelineCmd(append([]string{"--url", s.URL, "-n", "shop"}, c.args...), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut.String())
		}
		data := []byte(out.String())
		if c.args[1] == "yaml" {
			var err error
			if data, err = yaml.YAMLToJSON(data); err != nil {
				t.Fatalf("%v: %v", c.args, err)
			}
		}
		var fields map[string]json.RawMessage
		var doc timelineDoc
		err := errors.Join(json.Unmarshal(data, &fields), json.Unmarshal(data, &doc))
		if got := strings.Join(slices.Sorted(maps.Keys(fields)), ","); err != nil || got != c.fields || !slices.Equal(paths, c.paths) {
			t.Errorf("%v: fields %s, requests %v (%v); want %s, %v", c.args, got, paths, err, c.fields, c.paths)
		}
		if len(doc.Terminations) != 1 || doc.Terminations[0].Counts.RefusedAfterSigterm != 44 {
			t.Errorf("%v: terminations %+v", c.args, doc.Terminations)
		}
		if c.fields == "terminations" {
			continue
		}
		if len(doc.Startups) != 1 {
			t.Fatalf("%v: %d startups, want 1:\n%s", c.args, len(doc.Startups), out.String())
		}
		st := doc.Startups[0]
		want := correlate.StartupCounts{RefusedBeforeReady: 2, RefusedAfterReady: 39, ResetAfterReady: 1, ProbeRefused: 3}
		if st.Pod != "web-b" || st.Daemon != s.URL || st.Counts != want || st.ReadyToFirstAccept != 2600*time.Millisecond ||
			len(st.Diagnoses) != 1 || st.Diagnoses[0].Code != correlate.DiagReadyBeforeListening {
			t.Errorf("%v: startup %+v", c.args, st)
		}
	}
}

// TestTimelineOldDaemonsSaidOnce: daemons too old to serve startups are
// named on one line of stderr; their terminations and the others'
// startups are listed, and the exit code is 0.
func TestTimelineOldDaemonsSaidOnce(t *testing.T) {
	current := rolloutDaemon(t, time.Now().Add(-10*time.Minute))
	var old []string
	for _, pod := range []string{"web-c", "web-d"} {
		mux := http.NewServeMux() // a daemon from before /api/v1/startups
		mux.Handle("GET /api/v1/terminations", exporter.NewServer(exporter.ServerConfig{
			Source: oneTermination(webTermination(pod, 1, time.Now().Add(-5*time.Minute))), Log: zerolog.Nop()}).Handler())
		s := httptest.NewServer(mux)
		t.Cleanup(s.Close)
		old = append(old, s.URL)
	}
	var out, errOut strings.Builder
	code := timelineCmd([]string{"--url", strings.Join(append([]string{current.URL}, old...), ","), "-n", "shop"}, &out, &errOut)
	wantErr := "drainwatch timeline: no startups from the daemons that do not serve /api/v1/startups " +
		"(older than this drainwatch: upgrade them to see their new pods): " + old[0] + ", " + old[1] + "\n"
	terminations, startups, _ := strings.Cut(out.String(), "\nNew pods (startups)\n\n")
	if code != 0 || errOut.String() != wantErr || startups != wantWebBStartup(current.URL) ||
		strings.Count(terminations, "\nshop/web-") != 2 || !strings.HasPrefix(terminations, "shop/web-a  ") {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant 0, %q, web-a, web-c and web-d's terminations, web-b's startup", code, errOut.String(), out.String(), wantErr)
	}
}

func TestPrintStartupNotesTruncated(t *testing.T) {
	var errOut strings.Builder
	printStartupNotes(&errOut, exporter.Timeline{TruncatedStartups: []string{"drainwatch/dw-a", "drainwatch/dw-b"}})
	want := "drainwatch timeline: more startups match than a daemon lists at once (500): the latest 500 of each are shown " +
		"from drainwatch/dw-a, drainwatch/dw-b; narrow the query (-n, --workload, --revision, --since)\n"
	if errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
}

// TestTimelineStartups401SaysWhichToken: a --url daemon's 401 to the
// startups list carries the terminations' hint.
func TestTimelineStartups401SaysWhichToken(t *testing.T) {
	unauthorized := errors.New("GET https://node-1:9090/api/v1/startups?limit=500: 401 Unauthorized: Unauthorized")
	_, err := audienceHint{failingDaemon{unauthorized}}.Startups(context.Background(), nil)
	want := unauthorized.Error() + ": the daemon (--auth=kubernetes) takes a token bound to the drainwatch audience, verified with " +
		`--certificate-authority: --token "$(kubectl create token NAME -n NAMESPACE --audience drainwatch)" for a ServiceAccount ` +
		"bound to the terminations reader ClusterRole"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
