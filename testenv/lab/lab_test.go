package lab_test

import (
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/chromium"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

func TestMain(m *testing.M) { cptest.Main(m) }

// expectations are what each scenario must show besides agreement, so a
// lab that measures nothing (0 = 0 everywhere) fails. Numbers the scenario
// fixes are exact; refusal counts of a server that closes its listener
// early depend on where the client's requests fall around that close and
// vary run to run, so they have a floor here, and are compared exactly
// against drainwatch's by Agree.
var expectations = map[string]func(lab.Result) bool{
	// /work every 20 ms and /ready every 50 ms for 1 s after the listener's
	// close: at least 10 of them meet it closed, how many more varies.
	"seeds/naive": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly)
	},
	"seeds/protocol-1.5s": func(r lab.Result) bool { return r.ClientRefused == 0 && r.ClientKilled == 0 },
	"seeds/protocol-0s": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly)
	},
	// Refusals of a rollout without preStop depend on how far the router
	// lags each old pod's close: varies run to run, never 0.
	// The router's dials after the naive server closed its listener are
	// refused, or blackholed once its network is gone: which of the two
	// depends on the run (65 refused, 0 blackholed in one), their sum never
	// 0. Both pairs must be equal (Agree).
	"rollout/revision-1 (no preStop)": func(r lab.Result) bool {
		return r.ClientRefused+r.ClientBlackholed > 0 && r.ClientKilled == 0
	},
	// The closed loop: revision 2 has no preStop either (the patch advise
	// printed from revision 1 replaces it, kubectl applies it as a user
	// would), revision 3 sleeps what advise said and loses nothing, and
	// advise, asked about revision 3's terminations, has nothing to change.
	"rollout/revision-2 (no preStop, replaced by advise's patch)": func(r lab.Result) bool {
		return r.ClientRefused+r.ClientBlackholed > 0 && r.ClientKilled == 0 &&
			strings.Contains(r.Note, `; advise -o patch, applied: {"spec":{"template":{"spec":{"containers":[{"lifecycle":{"preStop":{"exec":null,"sleep":{"seconds":`)
	},
	"rollout/revision-3 (the advised preStop)": func(r lab.Result) bool {
		return r.ClientRefused == 0 && r.ClientBlackholed == 0 && r.ClientKilled == 0 &&
			strings.HasSuffix(r.Note, "; advise -o patch once it was replaced: {}")
	},
	// Exactly the 3 /slow requests in flight are cut by the SIGKILL; /work
	// is kept clear of it; the 10 /work sent once the container is gone
	// (within the blackhole window) meet its network gone.
	"ignore-term": func(r lab.Result) bool {
		return r.ClientKilled == 3 && r.ClientBlackholed == 10 && has(r, correlate.DiagStopSignalIgnored) &&
			has(r, correlate.DiagRequestsKilled) && has(r, correlate.DiagBlackholed)
	},
	"prestop-fails": func(r lab.Result) bool { return has(r, correlate.DiagPrestopFailed) },
	// The same two over IPv6, at the dual-stack pod's second address: the
	// refusals, the SIGKILL's 3 and the 10 blackholed SYNs to that address.
	"ipv6/seeds-naive": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly)
	},
	"ipv6/ignore-term": func(r lab.Result) bool {
		return r.ClientKilled == 3 && r.ClientBlackholed == 10 && has(r, correlate.DiagStopSignalIgnored) &&
			has(r, correlate.DiagRequestsKilled) && has(r, correlate.DiagBlackholed)
	},
	// A mesh's pod, the proxy stopping first: the clients' SYNs, redirected
	// to the proxy's closed listener, are refused (the seeds' tens; how
	// many more varies), none is refused inside the pod, and
	// listener_closed and the fix name container proxy.
	"mesh/proxy-first": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ProxyRefusedInside == 0 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly) &&
			strings.Contains(r.Note, "listener_closed: container proxy :15006") && strings.Contains(r.Note, "to container proxy")
	},
	// The server stopping first: no client is refused; the proxy's forwards
	// of the window's /work and /ready (those sent once the server's
	// listener closed: tens, how many more varies) and of the kubelet's
	// probes meet the closed listener inside the pod, each a 503 at its
	// client; the fix names container server.
	"mesh/app-first": func(r lab.Result) bool {
		return r.ClientRefused == 0 && r.ProxyRefusedInside >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagRefusedInsidePod) &&
			!has(r, correlate.DiagListenerClosedEarly) && strings.Contains(r.Note, "to container server")
	},
	// The proxy as a native sidecar, stopped once the server has exited:
	// the server's listener closes first, so the proxy's forwards meet it
	// closed inside the pod until the server's drain ends and the proxy is
	// stopped; the fix names container server.
	"mesh/native-sidecar": func(r lab.Result) bool {
		return r.ProxyRefusedInside >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagRefusedInsidePod) &&
			strings.Contains(r.Note, "to container server")
	},
	// nginx closes its listener at its image's SIGQUIT and finishes the slow
	// download: the seeds' tens of refusals, nothing killed, and drainwatch
	// found SIGQUIT with no stop signal in the API.
	// nginx's `listen 8080` is on 0.0.0.0: the close is the pod's all the
	// same, before the exit.
	"nginx-sigquit": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly) &&
			strings.Contains(r.Note, "stop signal SIGQUIT (none in the API") && strings.Contains(r.Note, ", before the exit")
	},
	// Through a ClusterIP Service on the real kube-proxy, deleted right
	// after a sync: the naive server refuses until kube-proxy's next sync
	// (minSyncPeriod 1 s), the protocol nothing; each refusal reaches the
	// client as ECONNREFUSED through the DNAT, from the clients' node (the
	// DNAT keeps their address): the routing source is that node.
	"kube-proxy/naive": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly) &&
			strings.Contains(r.Note, "through kube-proxy nftables on labt-1") && strings.Contains(r.Note, "routing sources: node labt-1 ")
	},
	"kube-proxy/protocol-1.5s": func(r lab.Result) bool { return r.ClientRefused == 0 && r.ClientKilled == 0 },
	// The seeds on the real node (TestSeedsOnRealNode's floor): /work every
	// 20 ms and /ready every 50 ms meet the closed listener until the real
	// kubelet tears the sandbox down; the in-flight /slow completes.
	"real/seeds-naive": func(r lab.Result) bool {
		return r.ClientRefused >= 10 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly) &&
			strings.Contains(r.Note, "/slow ok")
	},
	// Behind a real proxy whose pool outlives the pods' idle timeout, how
	// many requests meet a closed connection depends on the round robin;
	// never none. With the pods' idle timeout longer than the pool, none.
	"l7/nginx":   func(r lab.Result) bool { return r.ProxyResetOnReuse > 0 },
	"l7/haproxy": func(r lab.Result) bool { return r.ProxyResetOnReuse > 0 },
	"l7/nginx-fix": func(r lab.Result) bool {
		return r.ProxyResetOnReuse == 0 && strings.Contains(r.Note, "client map[200:17]")
	},
	// No deletion in the stop/ scenarios: the cause in the note is the
	// scenario's. The liveness kill falls with 3 or 4 /slow of 4 s in
	// flight (one a second), so the listener stays closed at least 3 s of
	// /work every 20 ms: at least 100 refused, how many more varies with
	// where the kill falls (192 in one run).
	"stop/liveness-restart": func(r lab.Result) bool {
		return r.ClientRefused >= 100 && r.ClientKilled == 0 && has(r, correlate.DiagLivenessRestart) &&
			strings.Contains(r.Note, "cause container_restart (Killing: Container server failed liveness probe, will be restarted) of container server")
	},
	// The naive server exits at once; the /work every 20 ms refused are
	// those between its listener's close and the sandbox's removal (tens of
	// ms: 3 in one run), while its endpoint is still ready.
	"stop/node-pressure-eviction": func(r lab.Result) bool {
		return r.ClientRefused >= 1 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly) &&
			strings.Contains(r.Note, "cause node_pressure (DisruptionTarget: TerminationByKubelet, status reason Evicted) of the pod") &&
			strings.Contains(r.Note, "endpoint still ready at the listener's close: yes")
	},
	// The same for three pods stopped at once by a graceful node shutdown;
	// the row sums them (each pod's pairs must be equal, or the row has an
	// error), each pod's cause is in the note.
	"stop/node-shutdown": func(r lab.Result) bool {
		return r.ClientRefused >= 3 && r.ClientKilled == 0 && has(r, correlate.DiagListenerClosedEarly) &&
			strings.Count(r.Note, "cause node_shutdown (DisruptionTarget: TerminationByKubelet, status reason Terminated) of the pod") == 3
	},
	// Each exit/ server dies with its 4 /slow in flight, no SIGKILL: all 4
	// killed at exit, the outcome killed, the diagnosis of how it died and
	// never clean. The exit code is the runtime's: Go exits 2 at SIGTERM
	// without signal.Notify (PID 1: the re-raised default action is
	// dropped), seed 003's main returns Shutdown's error (exit 1), tini
	// reports node's death of SIGTERM as 143.
	// Go's listener is on ::, Node.js's on 0.0.0.0; each closes at the
	// exit, except seed 003's, whose Shutdown closes it first.
	"exit/go-no-handler": func(r lab.Result) bool {
		return exitRow(r, correlate.DiagStopSignalKills, "exit code 2 (node agent), 2 (drainwatch); death exit_without_drain of dwserver") &&
			strings.Contains(r.Note, ", at the exit")
	},
	"exit/go-shutdown-short": func(r lab.Result) bool {
		return exitRow(r, correlate.DiagExitedInflight, "exit code 1 (node agent), 1 (drainwatch); death exit_after_shutdown of dwserver") &&
			strings.Contains(r.Note, ", before the exit")
	},
	"exit/node-tini": func(r lab.Result) bool {
		return exitRow(r, correlate.DiagStopSignalKills, "exit code 143 (node agent), 143 (drainwatch); death stop_signal of node") &&
			strings.Contains(r.Note, ", at the exit")
	},
	// Clients refused on both sides of Ready, nothing else lost; the
	// diagnosis names it.
	"startup/ready-before-listening": func(r lab.Result) bool {
		return r.ClientRefusedBeforeReady > 0 && r.ClientRefusedAfterReady > 0 && r.ClientRefused == 0 && r.ClientResetAfterReady == 0 &&
			slices.Equal(r.Diagnoses, []string{correlate.DiagReadyBeforeListening}) &&
			strings.Contains(r.Note, ", 0 reset before Ready;") && strings.Contains(r.Note, "probes refused 0")
	},
	// Every request is reset for 5.5 s after the start, Ready about 3 s
	// after it: resets on both sides, how many varies with when the probe
	// passes; nothing refused (the port listens at once).
	"startup/resets-after-ready": func(r lab.Result) bool {
		return r.ClientResetAfterReady > 0 && r.ClientRefusedBeforeReady == 0 && r.ClientRefusedAfterReady == 0 && r.ClientRefused == 0 &&
			slices.Equal(r.Diagnoses, []string{correlate.DiagReadyBeforeServing}) &&
			!strings.Contains(r.Note, ", 0 reset before Ready;") && strings.Contains(r.Note, "probes refused 0")
	},
	// Exactly the 3 /slow and the /alloc in flight die with the OOM kill.
	"stop/oom-kill": func(r lab.Result) bool {
		return r.ClientKilled == 4 && r.ClientRefused == 0 && has(r, correlate.DiagOOMKilled) &&
			strings.Contains(r.Note, "exit code 137 (OOMKilled); cause oom_kill (container terminated: OOMKilled) of container server")
	},
}

func has(r lab.Result, code string) bool { return slices.Contains(r.Diagnoses, code) }

// exitRow: an exit/ row lost its 4 requests at the exit, nothing else.
func exitRow(r lab.Result, diag, note string) bool {
	return r.ClientKilledAtExit == 4 && r.ClientKilled == 0 && r.ClientRefused == 0 && r.ClientResetAtShutdown == 0 &&
		has(r, diag) && !has(r, correlate.DiagClean) && strings.Contains(r.Note, note+"; outcome killed")
}

// TestLab runs `make lab` as a newcomer does (about 6 minutes): every
// scenario, the real node (kubelet, containerd) and its real/ scenarios
// included, with the drainwatch binary built from the current source, one
// process per node, and Prometheus: each pair of the final table must be
// equal exactly, each scenario must show what it is about, and the results
// directory must hold what the issue lists. Without the real node a
// stand-in Deployment's replica landing on it (a lab that fails for every
// newcomer) went unseen here.
func TestLab(t *testing.T) {
	privileged.RequireRoot(t)
	privileged.RequireFile(t, promtest.PrometheusBin, "Debian's prometheus (make deps)")
	privileged.RequireFile(t, chromium.Bin, "Debian's chromium (make deps)")
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	bin, err := lab.BuildDrainwatch(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.MkdirTemp("", "drainwatch-lab-results-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keepOnFailure(t, out) })
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	results, err := lab.Run(ctx, lab.Config{Out: out, Drainwatch: bin, ControlPlane: cp, NodePrefix: "labt-",
		Progress: lab.NewProgress(testWriter{t}), Log: log, Screenshots: true, RealNode: true})
	if err != nil {
		t.Error(err)
	}
	t.Logf("final table:\n%s", lab.Table(results))
	checkResults(t, results)
	checkResultsDir(t, out, len(results))
}

func checkResults(t *testing.T, results []lab.Result) {
	t.Helper()
	if len(results) != len(expectations) {
		t.Errorf("%d results, want %d", len(results), len(expectations))
	}
	for _, r := range results {
		if !r.Agree() {
			t.Errorf("%s: refused %d/%d killed %d/%d probe refused %d/%d reset at shutdown %d/%d (ground truth/drainwatch), error %q",
				r.Name, r.ClientRefused, r.DrainwatchRefused, r.ClientKilled, r.DrainwatchKilled, r.ProberProbeRefused,
				r.DrainwatchProbeRefused, r.ClientResetAtShutdown, r.DrainwatchResetAtShutdown, r.Error)
		}
		if want, ok := expectations[r.Name]; !ok || !want(r) {
			t.Errorf("%s does not show what it is about: %+v", r.Name, r)
		}
	}
}

// checkResultsDir: summary.json with the fields, a timeline and a
// client record per scenario, /metrics of both daemons, PNG screenshots.
func checkResultsDir(t *testing.T, out string, n int) {
	t.Helper()
	var s struct {
		Scenarios  []map[string]any `json:"scenarios"`
		Prometheus *lab.PromChecks  `json:"prometheus"`
	}
	body, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil || json.Unmarshal(body, &s) != nil || len(s.Scenarios) != n {
		t.Fatalf("summary.json: %d entries, %v:\n%s", len(s.Scenarios), err, body)
	}
	if s.Prometheus == nil || s.Prometheus.Alert.Error != "" || s.Prometheus.Dashboard.Failed {
		t.Errorf("summary.json: the alert and dashboard checks did not pass: %+v", s.Prometheus)
	}
	summary := s.Scenarios
	for _, k := range []string{"name", "client_refused", "drainwatch_refused", "client_killed", "drainwatch_killed",
		"client_killed_at_exit", "drainwatch_killed_at_exit",
		"prober_probe_refused", "drainwatch_probe_refused", "client_reset_at_shutdown", "drainwatch_reset_at_shutdown", "diagnoses"} {
		if _, ok := summary[0][k]; !ok {
			t.Errorf("summary.json entries lack %q: %v", k, summary[0])
		}
	}
	// One record per scenario, the real node's included: this lab runs as
	// make lab does.
	scenarios := len(lab.Scenarios())
	for _, pattern := range []string{"timelines/*.json", "clients/*.json"} {
		if files, _ := filepath.Glob(filepath.Join(out, pattern)); len(files) != scenarios {
			t.Errorf("%s: %d files, want one per scenario run (%d)", pattern, len(files), scenarios)
		}
	}
	for _, node := range []string{"labt-1", "labt-2", "labt-real"} {
		if b, err := os.ReadFile(filepath.Join(out, "metrics", node+".txt")); err != nil ||
			!strings.Contains(string(b), "drainwatch_connections_refused_after_sigterm_total") {
			t.Errorf("metrics of %s: %v", node, err)
		}
	}
	checkScreenshots(t, out)
}

func checkScreenshots(t *testing.T, out string) {
	t.Helper()
	shots, _ := filepath.Glob(filepath.Join(out, "screenshots", "*.png"))
	if want := screenshotsWritten(t, out); len(shots) != want {
		t.Errorf("%d screenshots, want %d (one per scenario and node with a termination of it)", len(shots), want)
	}
	for _, s := range shots {
		f, err := os.Open(s)
		if err != nil {
			t.Error(err)
			continue
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		f.Close()
	}
}

// screenshotsWritten is how many /ui pages the lab renders: one per
// scenario and node that reported one of its terminations, as the saved
// timelines say (where the scheduler places a rollout's pods varies).
func screenshotsWritten(t *testing.T, out string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "timelines", "*.json"))
	n := 0
	for _, f := range files {
		var tl []struct {
			Node string `json:"node"`
		}
		b, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(b, &tl)
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		nodes := map[string]bool{}
		for _, v := range tl {
			nodes[v.Node] = true
		}
		n += len(nodes)
	}
	return n
}

// keepOnFailure removes the results directory unless the test failed.
func keepOnFailure(t *testing.T, out string) {
	if t.Failed() {
		t.Logf("results kept in %s", out)
		return
	}
	os.RemoveAll(out)
}

// testWriter sends the lab's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
