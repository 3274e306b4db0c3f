package grafana

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// TestCommittedJSONIsGenerated fails when drainwatch.json is stale: run
// make generate (or go generate ./deploy/grafana/...).
func TestCommittedJSONIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("drainwatch.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("drainwatch.json differs from the generator's output: run make generate and commit it")
	}
}

// dashboardQueries returns every panel and annotation expression and the
// selectors of the template variables' label_values() queries, from the
// committed JSON.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	data, err := os.ReadFile("drainwatch.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, tg.Expr)
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, a.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if sel, ok := strings.CutPrefix(v.Query, "label_values("); ok && v.Type == "query" {
			qs = append(qs, sel[:strings.LastIndex(sel, ",")])
		}
	}
	return qs
}

func TestQueriesParseAsPromQL(t *testing.T) {
	qs := dashboardQueries(t)
	if len(qs) != 34 {
		t.Fatalf("%d queries, want 34 (29 panel targets, 1 annotation, 4 variables)", len(qs))
	}
	promtest.CheckQueries(t, qs)
}

func TestQueriesUseOnlyExportedMetrics(t *testing.T) {
	exported, err := promtest.ExportedNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range dashboardQueries(t) {
		names := promtest.MetricNames(q)
		if len(names) == 0 {
			t.Errorf("no metric in %q", q)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s (in %q) is not exported by drainwatch", n, q)
			}
		}
	}
}
