package lab

import (
	"os"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// TestSubstitute: Grafana's rendering of the lab's variables.
func TestSubstitute(t *testing.T) {
	vars := map[string]string{"namespace": "lab-rollout", "workload": "web", "revision": regexOf("1", "2"), "node": regexOf("lab-1", "lab-2")}
	got := substitute(`sum(increase(x{namespace=~"$namespace", workload=~"$workload", revision=~"$revision", node=~"$node"}[$__rate_interval]))`, vars)
	want := `sum(increase(x{namespace=~"lab-rollout", workload=~"web", revision=~"(1|2)", node=~"(lab-1|lab-2)"}[1m]))`
	if got != want {
		t.Errorf("substitute = %s, want %s", got, want)
	}
}

// TestShippedPanels: the shipped dashboard's 22 panels with queries and
// its rollout annotation; every panel of expectedEmpty exists.
func TestShippedPanels(t *testing.T) {
	path, err := repoFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	panels, err := shippedPanels(body)
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]int{}
	for _, p := range panels {
		titles[p.Title] = len(p.Exprs)
	}
	if len(panels) != 28 || titles["Requests killed at exit"] != 1 || titles["Connections blackholed"] != 1 ||
		titles["Connections refused inside the pod (sidecars)"] != 1 || titles["Routing lag (last hour)"] != 2 || titles["annotation: Rollouts"] != 1 ||
		titles["Requests reset on reused connections"] != 1 || titles["Requests reset on reused connections outside terminations"] != 1 ||
		titles["New pods: connections refused after Ready"] != 1 || titles["New pods: connections reset after Ready"] != 1 ||
		titles["New pods: Ready to first accepted connection (last hour)"] != 2 {
		t.Errorf("panels %v, want 27 panels (routing lag and Ready to first accept with 2 queries each, both reuse panels, killed at exit, blackholed, refused inside the pod, the new pods' three) and the Rollouts annotation", titles)
	}
	for title := range expectedEmpty {
		if _, ok := titles[title]; !ok {
			t.Errorf("expectedEmpty lists %q, not a panel of the dashboard", title)
		}
	}
}

// TestPanelVerdict: a panel needs a series per query unless it is
// expected empty, and then it must have none.
func TestPanelVerdict(t *testing.T) {
	cases := []struct {
		name   string
		pc     PanelCheck
		wantOK bool
	}{
		{"data", PanelCheck{Series: []int{2}}, true},
		{"one query of two empty", PanelCheck{Series: []int{1, 0}}, false},
		{"empty", PanelCheck{Series: []int{0}}, false},
		{"empty on purpose", PanelCheck{Series: []int{0}, EmptyBecause: "why"}, true},
		{"data where none expected", PanelCheck{Series: []int{1}, EmptyBecause: "why"}, false},
	}
	for _, c := range cases {
		if got := panelVerdict(c.pc); (got == "") != c.wantOK {
			t.Errorf("%s: verdict %q, want ok=%v", c.name, got, c.wantOK)
		}
	}
	line, failed := dashboardSummary([]PanelCheck{{Title: "A"}, {Title: "B", EmptyBecause: "why"}, {Title: "C", Error: "no data"}})
	if want := "dashboard: 1/3 panels with data; empty on purpose: B (why); FAIL: C (no data)"; line != want || !failed {
		t.Errorf("summary %q (failed %v), want %q", line, failed, want)
	}
}

// TestAlertVerdict: the alert must fire for exactly the revisions that
// refused connections, and the rule's expression give the router's count.
func TestAlertVerdict(t *testing.T) {
	rows := []Result{{Revision: "1", ClientRefused: 44}, {Revision: "2"}}
	alert := func(rev string) promtest.Sample {
		return promtest.Sample{Labels: map[string]string{"workload": "web", "workload_kind": "Deployment", "revision": rev}, Value: 1}
	}
	expr := func(rev string, v float64) promtest.Sample {
		return promtest.Sample{Labels: map[string]string{"namespace": rolloutNS, "workload": "web", "revision": rev}, Value: v}
	}
	cases := []struct {
		name          string
		alerts, exprs []promtest.Sample
		wantErr       string
	}{
		{"fires for the lossy revision only", []promtest.Sample{alert("1")}, []promtest.Sample{expr("1", 44)}, ""},
		{"silent", nil, []promtest.Sample{expr("1", 44)}, "silent for revision 1"},
		{"fires for the clean one too", []promtest.Sample{alert("1"), alert("2")}, []promtest.Sample{expr("1", 44), expr("2", 1)}, "fired for revision 2"},
		{"wrong count", []promtest.Sample{alert("1")}, []promtest.Sample{expr("1", 43)}, "gives revision 1 43, the router saw 44"},
	}
	for _, c := range cases {
		ac := AlertCheck{Value: map[string]int{}}
		ac.fill(rows, c.alerts, c.exprs)
		got := ac.verdict(rows, wantFiring(rows))
		if (c.wantErr == "") != (got == "") || !strings.Contains(got, c.wantErr) {
			t.Errorf("%s: verdict %q, want %q", c.name, got, c.wantErr)
		}
	}
}
