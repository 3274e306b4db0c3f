package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// TestWideEscapesClusterStrings: a revision annotation's escape sequence
// and a tab or newline in it stay in their cell, escaped: one row per
// termination, the columns the header's.
func TestWideEscapesClusterStrings(t *testing.T) {
	v := exporter.NewTerminationView(correlate.Termination{PodUID: "u", Pod: "web-1\x1b]0;owned\x07", Node: "node-1",
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3\tx\nforged"}})
	var b bytes.Buffer
	if err := writeWide(&b, []exporter.TerminationView{v}, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || strings.ContainsAny(b.String(), "\x1b\x07\t") {
		t.Fatalf("wide output:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); len(f) != len(strings.Split(wideHeader, "\t")) ||
		f[1] != `web-1\x1b]0;owned\a` || f[3] != `3\tx\nforged` {
		t.Errorf("row %q", lines[1])
	}
}
