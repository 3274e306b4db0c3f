package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

var shopWeb = collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "1"}

// promTerminations feeds m's histograms: one termination per drain, its
// routing lag from lags (none past its length), its grace used the drain
// plus 10 ms (the stop signal comes 10 ms after the deletion).
type promTerminations struct {
	m *exporter.Metrics
	n int
}

func (p *promTerminations) add(w collector.Workload, lag, drain time.Duration, change func(*correlate.Termination)) {
	p.n++
	t0 := time.Now()
	stop := t0.Add(10 * time.Millisecond)
	t := correlate.Termination{PodUID: fmt.Sprintf("uid-%d", p.n), Pod: fmt.Sprintf("%s-%d", w.Name, p.n), Workload: w,
		Marks:   correlate.Marks{DeleteRequested: t0, Killing: t0, EndpointsNotReady: stop, StopSignal: stop, Exit: stop.Add(drain)},
		Outcome: correlate.OutcomeClean, Cause: correlate.CauseRollout, Complete: true}
	if lag >= 0 {
		t.LastConnAttempt = stop.Add(lag)
	}
	if change != nil {
		change(&t)
	}
	p.m.ObserveTermination(t)
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestAdviseFromPrometheus: terminations fed to a real exporter, scraped
// by the real Prometheus (Debian's), and drainwatch advise --prometheus,
// the built binary, reading them back. Every expected value is a bucket
// bound derived by hand below, from the exporter's buckets:
//
//	routing lag 0.05 0.1 0.25 0.5 1 2 3 5 10 30
//	phases      0.05 0.1 0.25 0.5 1 2 5 10 30 60 120
func TestAdviseFromPrometheus(t *testing.T) {
	m := exporter.NewMetrics(exporter.Options{})
	prom := promtest.ScrapeHandler(t, exporter.NewServer(exporter.ServerConfig{Metrics: m, Log: zerolog.Nop()}).Handler())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	feed := &promTerminations{m: m}
	// Five pod terminations of shop/web: lags 0.08 0.2 0.4 0.9 1.5 s
	// (buckets 0.1 0.25 0.5 1 2), drains 0.3 0.7 1.4 1.6 4 s (buckets 0.5 1
	// 2 2 5), grace used 0.31 0.71 1.41 1.61 4.01 s (the same buckets).
	lags, drains := []int{80, 200, 400, 900, 1500}, []int{300, 700, 1400, 1600, 4000}
	for i := range lags {
		feed.add(shopWeb, ms(lags[i]), ms(drains[i]), func(t *correlate.Termination) {
			if i == 4 { // SIGKILL ended the slowest, killing a request; it also had 2 resets on reuse
				t.Marks.Sigkill, t.Outcome = t.Marks.Exit, correlate.OutcomeKilled
				t.Counts = correlate.Counts{RequestsKilledBySigkill: 1, RequestsResetOnReusedConnections: 2}
			}
		})
	}
	// A container restart: no routing lag, no deletion, but its drain of
	// 0.2 s (bucket 0.25) is in the drain histogram.
	feed.add(shopWeb, -1, ms(200), func(t *correlate.Termination) {
		t.Container, t.Cause, t.Marks.DeleteRequested, t.Marks.EndpointsNotReady = "server", correlate.CauseContainerRestart, time.Time{}, time.Time{}
	})
	// Another namespace, not asked for.
	feed.add(collector.Workload{Namespace: "other", Kind: "Deployment", Name: "api", Revision: "1"}, ms(100), 50*time.Second, nil)
	m.AddSteadyReuseResets([]correlate.WorkloadCount{{Workload: shopWeb, N: 4}})
	prom.WaitValue(ctx, t, `sum(drainwatch_terminations_total)`, 7)

	got := adviseJSON(t, "--prometheus", prom.URL, "-n", "shop", "-o", "json")
	// routing lag: N 5; p50 rank ⌈2.5⌉ = 3 → bucket 0.5; p99 rank ⌈4.95⌉ =
	// 5 → 2; max 2. drain: N 6 (the restart's too); cumulative 0.25:1
	// 0.5:2 1:3 2:5 5:6: p50 rank 3 → 1, p99 rank ⌈5.94⌉ = 6 → 5, max 5.
	// grace used: N 5; p50 rank 3 → 2, p99 and max 5.
	// preStop ⌈2 + 1⌉ = 3; grace 3 + ⌈5 + 1⌉ = 9 (the daemons' samples
	// would say ⌈1.5 + 1⌉ = 3 and 3 + ⌈4 + 1⌉ = 8).
	want := advise.Advice{Workload: advise.WorkloadRef{Namespace: "shop", Kind: "Deployment", Name: "web"}, From: advise.FromPrometheus,
		Terminations: 5, Skipped: 1,
		RoutingLag: stat(5, 0.5, 2, 2), Drain: stat(6, 1, 5, 5), GraceUsed: stat(5, 2, 5, 5),
		ResetsOnReuse: 2, ResetsOutsideTerminations: 4, RequestsKilledBySigkill: 1,
		Enough: true, PrestopSleepSeconds: 3, TerminationGraceSeconds: 9}
	checkAdvice(t, got, want)

	// The text docs/advise.md shows.
	stdout, stderr, code := runBinary(t, nil, binary(t), "advise", "--prometheus", prom.URL, "-n", "shop")
	t.Logf("exit %d, stderr %q, text:\n%s", code, stderr, stdout)
	if code != 0 || !strings.Contains(stdout, "    terminationGracePeriodSeconds 9 = preStop 3 s + ⌈p99 drain 5.000s + margin 1.000s⌉ (over 6 terminations; max 5.000s)\n") {
		t.Errorf("text output lacks the advice of 9 s")
	}

	// A window that starts after those were scraped counts only what came
	// after: 3 terminations with lags of 2.5 s (bucket 3) and drains of 8,
	// 8.5 and 9 s (bucket 10; grace used +10 ms, bucket 10).
	time.Sleep(promtest.ScrapeInterval) // past the last scrape before since (not an assertion)
	since := time.Now()
	for _, d := range []int{8000, 8500, 9000} {
		feed.add(shopWeb, ms(2500), ms(d), nil)
	}
	prom.WaitValue(ctx, t, `sum(drainwatch_terminations_total)`, 10)
	got = adviseJSON(t, "--prometheus", prom.URL, "-n", "shop", "deploy/web", "--since", since.Format(time.RFC3339Nano), "-o", "json")
	// preStop ⌈3 + 1⌉ = 4; grace 4 + ⌈10 + 1⌉ = 15.
	checkAdvice(t, got, advise.Advice{Workload: want.Workload, From: advise.FromPrometheus, Terminations: 3,
		RoutingLag: stat(3, 3, 3, 3), Drain: stat(3, 10, 10, 10), GraceUsed: stat(3, 10, 10, 10),
		Enough: true, PrestopSleepSeconds: 4, TerminationGraceSeconds: 15})

}

func stat(n int, p50, p, maxSeconds float64) advise.Stat {
	sec := func(v float64) advise.Seconds { return advise.Seconds(v * float64(time.Second)) }
	return advise.Stat{N: n, P50: sec(p50), P: sec(p), Max: sec(maxSeconds)}
}

// checkAdvice compares the numbers of got with want (not the sentences).
func checkAdvice(t *testing.T, got []advise.Advice, want advise.Advice) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("got %d advices, want 1: %+v", len(got), got)
	}
	a := got[0]
	if len(a.Notes) == 0 || !strings.HasPrefix(a.Notes[0], "from Prometheus:") {
		t.Errorf("notes %q: want the histograms' note first", a.Notes)
	}
	a.Rule, a.Percentile, a.Why, a.Notes = "", 0, nil, nil
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("advice (-want +got):\n%s", diff)
	}
}

func adviseJSON(t *testing.T, args ...string) []advise.Advice {
	t.Helper()
	stdout, stderr, code := runBinary(t, nil, binary(t), append([]string{"advise"}, args...)...)
	var out adviceList
	if err := json.Unmarshal([]byte(stdout), &out); code != 0 || err != nil {
		t.Fatalf("drainwatch advise %q: exit %d (%v), stderr %s", args, code, err, stderr)
	}
	t.Logf("drainwatch advise %q:\n%s", args, stdout)
	return out.Advice
}

// --prometheus excludes the daemons' flags, and its token goes only over
// https or to loopback.
func TestAdvisePrometheusFlagsRefused(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for args, msg := range map[string]string{
		"--prometheus http://prom.example:9090 --prometheus-token-file " + token: "--prometheus-token-file would cross http://prom.example:9090 in clear text: " +
			"serve Prometheus with TLS and pass --prometheus https://prom.example:9090 (with --prometheus-ca-file), or leave the token out for a Prometheus that asks for none",
		"--prometheus http://127.0.0.1:9090 --url http://127.0.0.1:9091": "--prometheus and --url contradict each other: advise reads either Prometheus or the daemons",
		"--prometheus https://prom.example --token t":                    "--token, --certificate-authority, --tls-server-name and --insecure-skip-tls-verify are for --url daemons: with --prometheus pass --prometheus-token-file and --prometheus-ca-file",
		"--prometheus prom.example:9090":                                 `--prometheus "prom.example:9090": want https://HOST:9090 (or http:// for one without TLS)`,
		"--url http://127.0.0.1:9091 --prometheus-token-file " + token:   "--prometheus-token-file and --prometheus-ca-file go with --prometheus URL",
	} {
		var out, errOut strings.Builder
		if code := adviseCmd(append(strings.Fields(args), "-n", "shop"), &out, &errOut); code != 2 || errOut.String() != "drainwatch advise: "+msg+"\n" {
			t.Errorf("advise %s: exit %d, stderr %q; want 2, %q", args, code, errOut.String(), msg)
		}
	}
}

// Over http to a loopback address the token is sent; an empty answer
// advises nothing.
func TestAdvisePrometheusTokenToLoopback(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var auth []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer prom.Close()
	var out, errOut strings.Builder
	code := adviseCmd([]string{"--prometheus", prom.URL, "--prometheus-token-file", token, "-n", "shop"}, &out, &errOut)
	want := "drainwatch advise: no termination of the selected workloads: nothing to advise\n"
	if code != 0 || out.String() != "" || errOut.String() != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, nothing, %q", code, out.String(), errOut.String(), want)
	}
	if len(auth) == 0 || slices.IndexFunc(auth, func(a string) bool { return a != "Bearer s3cret" }) >= 0 {
		t.Errorf("Authorization headers %q, want Bearer s3cret on each query", auth)
	}
}
