package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// lagDaemon serves one termination of shop/Deployment/web whose routing
// lag (from "node n1") is lag and whose drain is 0.4 s.
func lagDaemon(t *testing.T, pod string, lag time.Duration) *httptest.Server {
	t.Helper()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	enr, stop := t0.Add(100*time.Millisecond), t0.Add(200*time.Millisecond)
	term := correlate.Termination{PodUID: "uid-" + pod, Pod: pod, Node: "n1",
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "2"},
		Complete: true, GracePeriod: 30 * time.Second, LastConnAttempt: enr.Add(lag),
		Marks:          correlate.Marks{DeleteRequested: t0, EndpointsNotReady: enr, StopSignal: stop, Exit: stop.Add(400 * time.Millisecond)},
		RoutingSources: []correlate.RoutingSource{{Source: "node n1", Kind: "node", Refused: 2, Last: enr.Add(lag), Lag: lag}}}
	s := httptest.NewServer(exporter.NewServer(exporter.ServerConfig{Source: oneTermination(term), Log: zerolog.Nop()}).Handler())
	t.Cleanup(s.Close)
	return s
}

func threeDaemons(t *testing.T) string {
	return lagDaemon(t, "web-a", 900*time.Millisecond).URL + "," + lagDaemon(t, "web-b", 1520*time.Millisecond).URL + "," +
		lagDaemon(t, "web-c", 1200*time.Millisecond).URL
}

func TestAdviseTextAcrossDaemons(t *testing.T) {
	var out, errOut strings.Builder
	if code := adviseCmd([]string{"deploy/web", "--url", threeDaemons(t), "-n", "shop"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := `shop/Deployment/web: 3 terminations measured, 0 skipped; rule: p99 over at least 3 terminations, margin 1s
  routing lag                     3 terminations  p50 1.200s  p99 1.520s  max 1.520s
    from node n1                  3 terminations  p50 1.200s  p99 1.520s  max 1.520s
  drain (exit − stop signal)      3 terminations  p50 0.400s  p99 0.400s  max 0.400s
  grace used (exit − deletion)    3 terminations  p50 0.600s  p99 0.600s  max 0.600s
  grace period given: 30.000s; drains ended by SIGKILL: 0; requests reset on reuse: 0 (0 before the stop signal)
  advice:
    preStop sleep 3 s = ⌈p99 routing lag 1.520s + margin 1.000s⌉ (over 3 terminations; max 1.520s)
    terminationGracePeriodSeconds 5 = preStop 3 s + ⌈p99 drain 0.400s + margin 1.000s⌉ (over 3 terminations; max 0.400s)
`
	if out.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestAdviseTooFewAdvisesNothing(t *testing.T) {
	var out, errOut strings.Builder
	code := adviseCmd([]string{"--url", lagDaemon(t, "web-a", time.Second).URL, "-n", "shop", "-o", "json"}, &out, &errOut)
	var list adviceList
	if err := json.Unmarshal([]byte(out.String()), &list); code != 0 || err != nil || len(list.Advice) != 1 {
		t.Fatalf("exit %d %v: %s %s", code, err, out.String(), errOut.String())
	}
	a := list.Advice[0]
	if a.Enough || a.PrestopSleepSeconds != 0 || !strings.HasPrefix(a.Why[0], "too few terminations to advise: routing lag measured in 1, drain in 1, the rule wants 3") {
		t.Errorf("%+v", a)
	}
	// --min-terminations 1 takes the one.
	out.Reset()
	adviseCmd([]string{"--url", lagDaemon(t, "web-a", time.Second).URL, "-n", "shop", "-o", "json", "--min-terminations", "1", "--margin", "500ms"}, &out, &errOut)
	if err := json.Unmarshal([]byte(out.String()), &list); err != nil || list.Advice[0].PrestopSleepSeconds != 2 || list.Advice[0].TerminationGraceSeconds != 3 {
		t.Errorf("%v %s", err, out.String())
	}
}

func TestAdviseEmitPolicy(t *testing.T) {
	var out, errOut strings.Builder
	if code := adviseCmd([]string{"-A", "--url", threeDaemons(t), "--emit-policy"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, s := range []string{"kind: ValidatingAdmissionPolicy\n", "kind: ValidatingAdmissionPolicyBinding\n",
		"  deployment.web.grace_seconds: \"5\"\n  deployment.web.prestop_seconds: \"3\"\n", "  namespace: shop\n"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("no %q in:\n%s", s, out.String())
		}
	}
}

func TestAdviseFlagMistakes(t *testing.T) {
	for args, msg := range map[string]string{
		"deploy/web -A":        "drainwatch advise: -A with deploy/web: name the namespace with -n instead\n",
		"pod/web":              `drainwatch advise: workload "pod/web": want KIND/NAME with KIND deploy, sts, ds or rollout (deploy/web)` + "\n",
		"-o wide":              `drainwatch advise: -o "wide": want text, yaml, json or patch` + "\n",
		"-A -n shop":           "drainwatch advise: -A and -n contradict each other\n",
		"--percentile 0":       "drainwatch advise: --percentile=0: want a number in (0, 100]\n",
		"deploy/a deploy/b":    `drainwatch advise: one workload at most (deploy/web), got ["deploy/a" "deploy/b"]` + "\n",
		"--min-terminations 0": "drainwatch advise: --min-terminations=0: want 1 or more\n",
	} {
		var out, errOut strings.Builder
		if code := adviseCmd(strings.Fields(args), &out, &errOut); code != 2 || errOut.String() != msg {
			t.Errorf("%s: exit %d, %q; want 2, %q", args, code, errOut.String(), msg)
		}
	}
	f, err := parseAdviseFlags([]string{"-n", "shop", "sts/db", "-o", "patch"}, &strings.Builder{})
	if err != nil || f.kind != "StatefulSet" || f.workload != "db" || f.format != "patch" || f.namespace != "shop" {
		t.Errorf("%+v %v", f, err)
	}
	for _, arg := range []string{"ro/web", "rollout/web", "Rollouts/web"} {
		if kind, name, err := parseWorkloadArg(arg); kind != "Rollout" || name != "web" || err != nil {
			t.Errorf("%s: %s %s %v", arg, kind, name, err)
		}
	}
}
