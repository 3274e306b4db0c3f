package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// The shipped rules and dashboard, relative to the repository's root.
const (
	alertRules = "deploy/prometheus/alerts.yaml"
	dashboard  = "deploy/grafana/drainwatch.json"
)

// refusedAlert is the alert the rolling update must raise for the revision
// that refused connections, and only for it.
const refusedAlert = "DrainwatchConnectionsRefusedAfterSigterm"

// AlertCheck is the refused-connections alert's verdict on the rolling
// update, in summary.json.
type AlertCheck struct {
	Alert string `json:"alert"`
	// Firing and Silent are the rollout's revisions the alert fired for
	// and stayed silent for; Value the rule's expression per revision.
	Firing []string       `json:"firing"`
	Silent []string       `json:"silent"`
	Value  map[string]int `json:"value"`
	Result string         `json:"result"`
	Error  string         `json:"error,omitempty"`
}

// alertRule is one rule of the shipped file.
type alertRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
	For   string `json:"for"`
}

// checkRefusedAlert: after the rolling update, the alert fires for each
// replaced revision whose pods refused connections (the router's count),
// labelled with its namespace, workload and revision, and for no other;
// the rule's own expression gives each firing revision exactly the
// router's count (Prometheus started with the lab, so "the last 10
// minutes" is the whole run). The rule has no `for`, so firing is
// immediate at the next evaluation (every second here).
func (l *Lab) checkRefusedAlert(ctx context.Context, rows []Result) (c AlertCheck) {
	c = AlertCheck{Alert: refusedAlert, Value: map[string]int{}}
	defer func() { c.Result = c.summary(rows) }()
	rule, err := shippedRule(refusedAlert)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if rule.For != "" && rule.For != "0s" {
		c.Error = fmt.Sprintf("%s has for: %s; the lab expects it to fire at once", refusedAlert, rule.For)
		return c
	}
	want := wantFiring(rows)
	sel := fmt.Sprintf(`ALERTS{alertname=%q, alertstate="firing", namespace=%q}`, refusedAlert, rolloutNS)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	alerts, err := l.Prom.QueryWhen(qctx, sel, func(s []promtest.Sample) bool { return len(s) >= len(want) })
	if err != nil {
		c.Error = fmt.Sprintf("prometheus: %v", err)
		return c
	}
	expr, err := l.Prom.Query(ctx, rule.Expr)
	if err != nil {
		c.Error = fmt.Sprintf("prometheus: %v", err)
		return c
	}
	c.fill(rows, alerts, expr)
	c.Error = c.verdict(rows, want)
	return c
}

// wantFiring maps each replaced revision whose pods refused connections to
// the router's count.
func wantFiring(rows []Result) map[string]int {
	want := map[string]int{}
	for _, r := range rows {
		if r.ClientRefused > 0 {
			want[r.Revision] = r.ClientRefused
		}
	}
	return want
}

// fill records what the alert and the rule's expression say about the
// rollout's revisions.
func (c *AlertCheck) fill(rows []Result, alerts, expr []promtest.Sample) {
	firing := map[string]bool{}
	for _, a := range alerts {
		if a.Labels["workload"] == "web" && a.Labels["workload_kind"] == "Deployment" {
			firing[a.Labels["revision"]] = true
		}
	}
	for _, s := range expr {
		if s.Labels["namespace"] == rolloutNS && s.Labels["workload"] == "web" {
			c.Value[s.Labels["revision"]] = int(s.Value)
		}
	}
	for _, r := range rows {
		if firing[r.Revision] {
			c.Firing = append(c.Firing, r.Revision)
		} else {
			c.Silent = append(c.Silent, r.Revision)
		}
	}
	// A revision firing that is not a replaced one (the current revision
	// terminated nothing) is an error too.
	for rev := range firing {
		if !slices.Contains(c.Firing, rev) {
			c.Firing = append(c.Firing, rev)
		}
	}
}

// verdict is empty when the alert fired for exactly the revisions that
// refused connections, with their exact counts.
func (c *AlertCheck) verdict(rows []Result, want map[string]int) string {
	var wrong []string
	for _, rev := range c.Firing {
		if _, ok := want[rev]; !ok {
			wrong = append(wrong, fmt.Sprintf("fired for revision %s, whose pods refused nothing", rev))
		}
	}
	for rev, n := range want {
		if !slices.Contains(c.Firing, rev) {
			wrong = append(wrong, fmt.Sprintf("silent for revision %s, whose pods refused %d", rev, n))
		}
		if c.Value[rev] != n {
			wrong = append(wrong, fmt.Sprintf("the rule's expression gives revision %s %d, the router saw %d refused", rev, c.Value[rev], n))
		}
	}
	for rev, v := range c.Value {
		if _, ok := want[rev]; !ok {
			wrong = append(wrong, fmt.Sprintf("the rule's expression gives revision %s %d, the router saw none refused", rev, v))
		}
	}
	if len(rows) == 0 {
		wrong = append(wrong, "no rollout revision to check")
	}
	slices.Sort(wrong)
	return strings.Join(wrong, "; ")
}

// summary is the check's one line.
func (c *AlertCheck) summary(rows []Result) string {
	var parts []string
	for _, r := range rows {
		if slices.Contains(c.Firing, r.Revision) {
			parts = append(parts, fmt.Sprintf("firing for %s/web revision %s (expr %d = %d refused at the router)",
				rolloutNS, r.Revision, c.Value[r.Revision], r.ClientRefused))
		} else {
			parts = append(parts, fmt.Sprintf("silent for %s/web revision %s (%d refused)", rolloutNS, r.Revision, r.ClientRefused))
		}
	}
	verdict := "ok"
	if c.Error != "" {
		verdict = "FAIL: " + c.Error
	}
	return fmt.Sprintf("alert %s: %s: %s", c.Alert, strings.Join(parts, ", "), verdict)
}

// shippedRule reads the alert named name from the shipped rules.
func shippedRule(name string) (alertRule, error) {
	path, err := repoFile(alertRules)
	if err != nil {
		return alertRule{}, err
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return alertRule{}, fmt.Errorf("reading the alert rules: %w", err)
	}
	var f struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(body, &f); err != nil {
		return alertRule{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r, nil
			}
		}
	}
	return alertRule{}, fmt.Errorf("%s: no alert %s", path, name)
}

// repoFile is rel's absolute path in the repository.
func repoFile(rel string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}
