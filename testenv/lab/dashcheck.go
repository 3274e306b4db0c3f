package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// expectedEmpty are the dashboard panels that show nothing in the lab, with
// why. Any other panel without data, or one of these with data, fails the
// check.
var expectedEmpty = map[string]string{
	// count(drainwatch_probe_attached == 0): a series only for a probe
	// that failed to attach; the lab's scenarios need every probe.
	"Nodes with a probe not attached": "every probe attached on both nodes",
}

// PanelCheck is one dashboard panel's (or annotation's) queries run over
// the lab against its Prometheus, in summary.json.
type PanelCheck struct {
	Title   string   `json:"title"`
	Queries []string `json:"queries"` // with the lab's values for the variables
	// Series and Max per query: how many series it returned over the run,
	// and their largest value.
	Series []int     `json:"series"`
	Max    []float64 `json:"max"`
	// EmptyBecause is set for a panel expected empty in the lab.
	EmptyBecause string `json:"empty_because,omitempty"`
	Error        string `json:"error,omitempty"`
}

// DashboardCheck is every panel's result and the one-line summary.
type DashboardCheck struct {
	Variables map[string]string `json:"variables"`
	Panels    []PanelCheck      `json:"panels"`
	Result    string            `json:"result"`
	Failed    bool              `json:"failed"`
}

// dashboardPanel is a panel's (or the annotation's) title and expressions
// as the shipped JSON holds them.
type dashboardPanel struct {
	Title string
	Exprs []string
}

// shippedPanels reads the panels with queries and the annotations of the
// shipped dashboard.
func shippedPanels(body []byte) ([]dashboardPanel, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("parsing the dashboard: %w", err)
	}
	var out []dashboardPanel
	for _, p := range d.Panels {
		var exprs []string
		for _, t := range p.Targets {
			exprs = append(exprs, t.Expr)
		}
		if len(exprs) > 0 {
			out = append(out, dashboardPanel{p.Title, exprs})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out = append(out, dashboardPanel{"annotation: " + a.Name, []string{a.Expr}})
		}
	}
	return out, nil
}

// substitute replaces the dashboard's variables as Grafana does for a
// multi-value selection inside a regex matcher ("(a|b)"); $__rate_interval
// is 1m, what Grafana picks at a 1 s scrape interval and 15 s resolution.
func substitute(expr string, vars map[string]string) string {
	pairs := []string{"$__rate_interval", "1m"}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		pairs = append(pairs, "$"+k, vars[k])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

// regexOf is Grafana's rendering of a multi-value variable in a regex.
func regexOf(values ...string) string {
	if len(values) == 1 {
		return values[0]
	}
	return "(" + strings.Join(values, "|") + ")"
}

// dashboardVars are the lab's values for the dashboard's variables: the
// rolling update's namespace, workload and replaced revisions, and both
// nodes.
func (l *Lab) dashboardVars(rows []Result) map[string]string {
	var revs []string
	for _, r := range rows {
		revs = append(revs, r.Revision)
	}
	return map[string]string{"namespace": rolloutNS, "workload": "web", "revision": regexOf(revs...),
		"node": regexOf(l.Cluster.NodeNames...)}
}

// checkDashboard runs every panel's queries, with the lab's values for
// the variables, over the whole run as range queries (what the panel
// draws): each must return a series, unless the panel is in
// expectedEmpty.
func (l *Lab) checkDashboard(ctx context.Context, rows []Result) DashboardCheck {
	c := DashboardCheck{Variables: l.dashboardVars(rows)}
	path, err := repoFile(dashboard)
	if err != nil {
		return c.fail(err)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return c.fail(fmt.Errorf("reading the dashboard: %w", err))
	}
	panels, err := shippedPanels(body)
	if err != nil {
		return c.fail(err)
	}
	end := time.Now()
	for _, p := range panels {
		c.Panels = append(c.Panels, l.checkPanel(ctx, p, c.Variables, end))
	}
	c.Result, c.Failed = dashboardSummary(c.Panels)
	return c
}

func (c DashboardCheck) fail(err error) DashboardCheck {
	c.Result, c.Failed = "dashboard: "+err.Error(), true
	return c
}

func (l *Lab) checkPanel(ctx context.Context, p dashboardPanel, vars map[string]string, end time.Time) PanelCheck {
	pc := PanelCheck{Title: p.Title, EmptyBecause: expectedEmpty[p.Title]}
	for _, e := range p.Exprs {
		q := substitute(e, vars)
		pc.Queries = append(pc.Queries, q)
		series, err := l.Prom.QueryRange(ctx, q, l.promStart, end, time.Second)
		if err != nil {
			pc.Error = err.Error()
			return pc
		}
		pc.Series = append(pc.Series, len(series))
		m := 0.0
		for _, s := range series {
			for _, v := range s.Values {
				if !math.IsNaN(v) { // a quantile or mean with no observation in its window
					m = max(m, v)
				}
			}
		}
		pc.Max = append(pc.Max, m)
	}
	pc.Error = panelVerdict(pc)
	return pc
}

// panelVerdict: every query of a panel returns a series, or none does and
// the panel is expected empty.
func panelVerdict(pc PanelCheck) string {
	empty := slices.Contains(pc.Series, 0)
	switch {
	case pc.EmptyBecause == "" && empty:
		return "no data: a query returned no series"
	case pc.EmptyBecause != "" && slices.ContainsFunc(pc.Series, func(n int) bool { return n > 0 }):
		return "expected empty (" + pc.EmptyBecause + ") and has data"
	}
	return ""
}

// dashboardSummary is the check's line: panels with data, those empty on
// purpose and why, and those that failed.
func dashboardSummary(panels []PanelCheck) (string, bool) {
	withData, failed := 0, false
	var purpose, wrong []string
	for _, p := range panels {
		switch {
		case p.Error != "":
			failed = true
			wrong = append(wrong, fmt.Sprintf("%s (%s)", p.Title, p.Error))
		case p.EmptyBecause != "":
			purpose = append(purpose, fmt.Sprintf("%s (%s)", p.Title, p.EmptyBecause))
		default:
			withData++
		}
	}
	line := fmt.Sprintf("dashboard: %d/%d panels with data", withData, len(panels))
	if len(purpose) > 0 {
		line += "; empty on purpose: " + strings.Join(purpose, ", ")
	}
	if len(wrong) > 0 {
		line += "; FAIL: " + strings.Join(wrong, ", ")
	}
	return line, failed
}
