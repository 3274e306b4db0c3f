package main

import (
	"strings"
	"testing"
)

func TestMatrix(t *testing.T) {
	run := func(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	m := &matrix{versions: []string{"v1.34.4", "v1.37.2"}, cells: map[[2]string]cell{}}
	if err := m.addRun("v1.34.4", run(
		`go: downloading x`,
		`{"Action":"run","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestSeedsDirect"}`,
		`{"Action":"pass","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestSeedsDirect/sub","Elapsed":1}`,
		`{"Action":"pass","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestSeedsDirect","Elapsed":41.26}`,
		`{"Action":"output","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestX","Output":"=== RUN   TestX\n"}`,
		`{"Action":"output","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestX","Output":"    x_test.go:12: needs Kubernetes >= 1.35 | a gate\n"}`,
		`{"Action":"skip","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestX","Elapsed":0}`,
	)); err != nil {
		t.Fatal(err)
	}
	if err := m.addRun("v1.37.2", run(
		`{"Action":"fail","Package":"github.com/drainwatch/drainwatch/testenv/e2e","Test":"TestSeedsDirect","Elapsed":3}`,
	)); err != nil {
		t.Fatal(err)
	}
	if err := m.addRun("v1.36.3", run(`# build failed`)); err == nil {
		t.Error("a run without a test: no error")
	}
	wantLines := `K8SMATRIX version=v1.34.4 package=testenv/e2e test=TestSeedsDirect result=pass seconds=41.3
K8SMATRIX version=v1.37.2 package=testenv/e2e test=TestSeedsDirect result=fail seconds=3.0
K8SMATRIX version=v1.34.4 package=testenv/e2e test=TestX result=skip seconds=0.0 why="needs Kubernetes >= 1.35 | a gate"
`
	if got := m.lines(); got != wantLines {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, wantLines)
	}
	wantTable := "| test | v1.34.4 | v1.37.2 |\n|---|---|---|\n" +
		"| `TestSeedsDirect` (testenv/e2e) | passes (41 s) | **fails** |\n" +
		"| `TestX` (testenv/e2e) | skipped: needs Kubernetes >= 1.35 \\| a gate | not run |\n"
	if got := m.table(); got != wantTable {
		t.Errorf("table:\n%s\nwant:\n%s", got, wantTable)
	}
	// The committed lines give the same table.
	back, err := parseLines(wantLines)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.table(); got != wantTable {
		t.Errorf("table from the lines:\n%s\nwant:\n%s", got, wantTable)
	}
	if _, err := parseLines("K8SMATRIX version=v1 nonsense"); err == nil {
		t.Error("a malformed line: no error")
	}
	doc := "a\n" + beginMarker + "\nold\n" + endMarker + "\nb\n"
	got, err := replaceBetweenMarkers(doc, "T\n")
	if err != nil || got != "a\n"+beginMarker+"\nT\n"+endMarker+"\nb\n" {
		t.Errorf("replaced: %q, %v", got, err)
	}
}
