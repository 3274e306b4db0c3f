package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// TestRolloutReport: the totals per revision are the sums of the
// workload's records, old pods' and new pods' apart; another workload of
// the same name (another kind) is left out; the slowest source is the
// longest lag; the diagnoses are counted; an unanswered daemon is named.
func TestRolloutReport(t *testing.T) {
	at := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	w := func(rev string) collector.Workload {
		return collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: rev}
	}
	term := func(pod, node string, rev string, refused, killed int, lag time.Duration, diags ...string) exporter.TerminationView {
		t := correlate.Termination{Pod: pod, PodUID: pod + "-uid", Node: node, Workload: w(rev), Complete: true,
			Counts: correlate.Counts{RefusedAfterSigterm: refused, RequestsKilledBySigkill: killed}}
		t.Marks.DeleteRequested = at
		t.RoutingSources = []correlate.RoutingSource{{Source: "node " + node, Kind: "node", Last: at.Add(lag), Lag: lag}}
		for _, d := range diags {
			t.Diagnoses = append(t.Diagnoses, correlate.Diagnosis{Code: d, Fix: "fix " + d})
		}
		t.Outcome = correlate.OutcomeRefused
		if killed > 0 {
			t.Outcome = correlate.OutcomeRefusedAndKilled
		}
		return exporter.TerminationView{Termination: t}
	}
	other := term("db-0", "n1", "1", 100, 100, time.Hour)
	other.Workload.Kind = "StatefulSet"
	tl := exporter.Timeline{
		Terminations: []exporter.TerminationView{
			term("web-a", "n1", "1", 3, 0, time.Second, "no_drain_delay"),
			term("web-b", "n2", "1", 4, 2, 3*time.Second, "no_drain_delay", "killed_by_sigkill"),
			other,
		},
		Startups: []exporter.StartupView{
			{Startup: correlate.Startup{Pod: "web-c", Node: "n3", Workload: w("2"), Marks: correlate.StartupMarks{Created: at.Add(time.Second)},
				Counts: correlate.StartupCounts{RefusedAfterReady: 1}}},
			{Startup: correlate.Startup{Pod: "web-d", Workload: w("2"), Marks: correlate.StartupMarks{Created: at.Add(2 * time.Second)}}, Daemon: "n2"},
		},
	}
	r := newRolloutReport("shop", "Deployment", "web", tl, []error{&exporter.DaemonError{Daemon: "n4", Err: errors.New("down")}})
	if r.Terminations != 2 || r.Startups != 2 || len(r.Revisions) != 2 || strings.Join(r.Nodes, ",") != "n1,n2,n3" {
		t.Fatalf("report %+v", r)
	}
	old, cur := r.Revisions[0], r.Revisions[1]
	if old.Revision != "1" || old.Terminations != 2 || old.RefusedAfterSigterm != 7 || old.RequestsKilledBySigkill != 2 || old.Startups != 0 {
		t.Errorf("revision 1: %+v", old)
	}
	if cur.Revision != "2" || cur.Startups != 2 || cur.RefusedAfterReady != 1 || cur.Terminations != 0 {
		t.Errorf("revision 2: %+v", cur)
	}
	if r.Slowest == nil || r.Slowest.Pod != "web-b" || r.Slowest.LagSeconds != 3 {
		t.Errorf("slowest %+v", r.Slowest)
	}
	if len(r.Diagnoses) != 2 || r.Diagnoses[0].Code != "no_drain_delay" || r.Diagnoses[0].Count != 2 || r.Diagnoses[1].Count != 1 {
		t.Errorf("diagnoses %+v", r.Diagnoses)
	}
	if len(r.Unanswered) != 1 || r.Unanswered[0] != "n4" {
		t.Errorf("unanswered %v", r.Unanswered)
	}
	// Every record one by one, in the order they began.
	var pods []string
	for _, p := range r.Pods {
		pods = append(pods, fmt.Sprintf("%s %s %s %s %s %q %v", p.Pod, p.Revision, p.Side, p.Node, p.Outcome, p.Lost, p.Diagnoses))
	}
	if got, want := strings.Join(pods, "\n"), strings.Join([]string{
		`web-a 1 gone n1 refused "3 refused" [no_drain_delay]`,
		`web-b 1 gone n2 refused_and_killed "4 refused, 2 killed by SIGKILL" [no_drain_delay killed_by_sigkill]`,
		`web-c 2 came n3 lost "1 refused after Ready" []`,
		`web-d 2 came n2 clean "" []`,
	}, "\n"); got != want {
		t.Errorf("pods:\n%s\nwant:\n%s", got, want)
	}
	var out strings.Builder
	if err := r.writeText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deployment/web in shop: 2 terminations and 2 startups on 3 nodes, 2 revisions",
		"NOT ANSWERED (their pods are missing): n4", "2× no_drain_delay: fix no_drain_delay", "still sending 3s after pod web-b",
		"web-b  1         gone  n2    2026-12-04T05:00:00Z  refused_and_killed  4 refused, 2 killed by SIGKILL  no_drain_delay,killed_by_sigkill"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	// -o html: one page, the report's tables and each old pod's timeline
	// as /ui draws it, no link to a daemon, names escaped.
	var page strings.Builder
	if err := r.writeHTML(&page, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, want := range []string{"<title>drainwatch — deployment/web in shop</title>", "Not answered (their pods are missing): n4",
		"<td>web-c</td><td>2</td><td class=\"l\">came</td>", "2× <b>no_drain_delay</b>: fix no_drain_delay",
		"still sending 3s after pod web-b", `aria-label="timeline of shop/web-a"`, `aria-label="timeline of shop/web-b"`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(html, "api/v1/terminations/") || strings.Count(html, "<svg") != 2 {
		t.Errorf("page has a daemon link or not 2 timelines (%d):\n%s", strings.Count(html, "<svg"), html)
	}
}

// TestRolloutArgs: KIND/NAME first or last, kubectl's short kinds; a bad
// reference or output is a usage error.
func TestRolloutArgs(t *testing.T) {
	for _, args := range [][]string{{"deploy/web", "-n", "shop"}, {"-n", "shop", "deployment/web"}} {
		f, kind, err := parseRolloutFlags(args, &strings.Builder{})
		if err != nil || kind != "Deployment" || f.workload != "web" || f.namespace != "shop" {
			t.Errorf("%q: %s %q %q %v", args, kind, f.workload, f.namespace, err)
		}
	}
	for _, args := range [][]string{{"web"}, {"pod/web"}, {"deploy/web", "-o", "yaml"}, {"deploy/web", "sts/db"}} {
		if _, _, err := parseRolloutFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
