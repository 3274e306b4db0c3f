package main

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

func TestTimelineKubectlStyleFlags(t *testing.T) {
	var errOut strings.Builder
	f, err := parseTimelineFlags([]string{"-n", "shop", "-o", "wide", "--revision", "7", "-f", "--interval", "2s"}, &errOut)
	if err != nil || f.namespace != "shop" || f.format != "wide" || f.revision != "7" || !f.follow || f.interval != 2*time.Second {
		t.Fatalf("parsed %+v, %v", f, err)
	}
	filter, err := f.filter(time.Now())
	if err != nil || filter.Namespace != "shop" || filter.Revision != "7" {
		t.Errorf("filter %+v, %v", filter, err)
	}
	if _, err := parseTimelineFlags([]string{"-o", "xml"}, &errOut); err == nil || err.Error() != `-o "xml": want text, wide, json or yaml` {
		t.Errorf("-o xml: %v", err)
	}
}

func TestTimelineSinceMistakesAreErrors(t *testing.T) {
	for arg, msg := range map[string]string{
		"-5m":       `drainwatch timeline: since="-5m" is negative: give how far back, like 5m0s` + "\n",
		"yesterday": `drainwatch timeline: since="yesterday" is neither RFC 3339 nor a duration like 15m` + "\n",
	} {
		var out, errOut strings.Builder
		code := timelineCmd([]string{"--url", "http://127.0.0.1:1", "--since=" + arg}, &out, &errOut)
		if code != 2 || errOut.String() != msg {
			t.Errorf("--since=%s: exit %d, stderr %q; want 2, %q", arg, code, errOut.String(), msg)
		}
	}
}

func TestTimelineWideYAMLAndRevision(t *testing.T) {
	stop := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := daemonWith(t, "web-a", 44, stop)
	var out, errOut strings.Builder
	if code := timelineCmd([]string{"--url", s.URL, "-n", "shop", "-o", "wide"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := "NAMESPACE  POD    WORKLOAD        REVISION  NODE        STARTED               OUTCOME  REFUSED  KILLED  KILLED-AT-EXIT  BLACKHOLED  RESET  COMPLETE\n" +
		"shop       web-a  Deployment/web  7         node-web-a  2026-03-04T05:06:06Z  refused  44       0       0               0           0      true\n" +
		"\nNAMESPACE  POD  WORKLOAD  REVISION  DAEMON  CREATED  READY  READY-TO-FIRST-ACCEPT  REFUSED-BEFORE-READY  REFUSED-AFTER-READY  RESET-AFTER-READY  PROBE-REFUSED  DIAGNOSES  COMPLETE\n"
	if out.String() != want {
		t.Errorf("-o wide:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if code := timelineCmd([]string{"--url", s.URL, "-o", "yaml"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var list exporter.TerminationList
	if err := yaml.Unmarshal([]byte(out.String()), &list); err != nil || len(list.Terminations) != 1 ||
		list.Terminations[0].Counts.RefusedAfterSigterm != 44 || list.Terminations[0].Workload.Revision != "7" {
		t.Errorf("-o yaml: %v\n%s", err, out.String())
	}
	out.Reset()
	if code := timelineCmd([]string{"--url", s.URL, "--revision", "8", "--startups=false"}, &out, &errOut); code != 0 || out.String() != "no termination matches\n" {
		t.Errorf("--revision 8: exit %d, output %q", code, out.String())
	}
}

// stepDaemon answers its polls in turn, the last one again once past the end.
type stepDaemon struct {
	polls [][]exporter.TerminationView
	n     *int
}

func (d stepDaemon) Name() string { return "step" }

func (d stepDaemon) Terminations(context.Context, url.Values) (exporter.TerminationList, error) {
	i := min(*d.n, len(d.polls)-1)
	*d.n++
	return exporter.TerminationList{Terminations: d.polls[i]}, nil
}

func (d stepDaemon) Startups(context.Context, url.Values) (exporter.StartupList, error) {
	return exporter.StartupList{}, errors.New("follow asks for no startups")
}

func TestTimelineFollowPrintsNewAndChanged(t *testing.T) {
	view := func(pod, outcome string, refused int) exporter.TerminationView {
		return exporter.TerminationView{Termination: correlate.Termination{PodUID: "uid-" + pod, Pod: pod, Node: "n1",
			Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web"}, Outcome: outcome, Counts: correlate.Counts{RefusedAfterSigterm: refused}}}
	}
	a0, a1, b := view("web-a", "", 0), view("web-a", "refused", 5), view("web-b", "clean", 0)
	n := 0
	d := stepDaemon{polls: [][]exporter.TerminationView{{a0}, {a0}, {a1, b}, {a1, b}}, n: &n}
	var out, errOut strings.Builder
	follow(context.Background(), follower{daemons: []exporter.Daemon{d}, format: "wide", interval: time.Millisecond,
		timeout: 10 * time.Second, polls: 4, stdout: &out, stderr: &errOut})
	// A row per termination when it appears or changes (web-a completes);
	// each poll's rows are aligned among themselves, as kubectl get -w.
	want := "NAMESPACE  POD    WORKLOAD        REVISION  NODE  STARTED  OUTCOME  REFUSED  KILLED  KILLED-AT-EXIT  BLACKHOLED  RESET  COMPLETE\n" +
		"shop       web-a  Deployment/web  -         n1    -        -        0        0       0               0           0      false\n" +
		"shop  web-a  Deployment/web  -  n1  -  refused  5  0  0  0  0  false\n" +
		"shop  web-b  Deployment/web  -  n1  -  clean    0  0  0  0  0  false\n"
	if n != 4 || out.String() != want || errOut.Len() != 0 {
		t.Errorf("%d polls, output:\n%q\nwant:\n%q\nstderr %s", n, out.String(), want, errOut.String())
	}
}
