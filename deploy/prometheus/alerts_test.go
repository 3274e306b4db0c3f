package prometheus

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

const promtool = "/usr/bin/promtool"

// runbookBase is where the alerts' runbook_url point: docs/runbooks/ on main.
const runbookBase = "https://github.com/drainwatch/drainwatch/blob/main/docs/runbooks/"

// TestAlertRules checks the rule file and runs its unit tests with Debian's
// promtool: the alerts fire with the exact values and annotations expected.
func TestAlertRules(t *testing.T) {
	privileged.RequireFile(t, promtool, "promtool (Debian's prometheus package: make deps)")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestAlertsUseOnlyExportedMetrics keeps the rules in step with /metrics.
func TestAlertsUseOnlyExportedMetrics(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	exported, err := promtest.ExportedNames()
	if err != nil {
		t.Fatal(err)
	}
	// kube-state-metrics' series the coverage alert reads (documented there).
	exported["kube_daemonset_status_number_unavailable"] = true
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			// Every alert links its runbook, and the runbook exists.
			if want := runbookBase + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if _, err := os.Stat("../../docs/runbooks/" + r.Alert + ".md"); err != nil {
				t.Errorf("%s: no runbook: %v", r.Alert, err)
			}
			for _, name := range promtest.MetricNames(r.Expr) {
				if !exported[name] {
					t.Errorf("%s: %s is not exported by drainwatch", r.Alert, name)
				}
			}
		}
	}
	if n != 13 {
		t.Errorf("%d alerts, want 13", n)
	}
}
