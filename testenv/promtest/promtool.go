package promtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// PromtoolBin is Debian's promtool.
const PromtoolBin = "/usr/bin/promtool"

// grafanaMacros are replaced by plain values so the real parser sees
// ordinary PromQL (Grafana substitutes them before sending a query).
var grafanaMacros = strings.NewReplacer(
	"$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
	`"$namespace"`, `".*"`, `"$workload"`, `".*"`, `"$revision"`, `".*"`, `"$node"`, `".*"`,
)

// CheckQueries makes Prometheus's own parser judge exprs: each becomes a
// recording rule of a generated file that `promtool check rules` loads.
func CheckQueries(t testing.TB, exprs []string) {
	t.Helper()
	privileged.RequireFile(t, PromtoolBin, "promtool (Debian's prometheus package: make deps)")
	var b strings.Builder
	b.WriteString("groups:\n  - name: queries\n    rules:\n")
	for i, e := range exprs {
		fmt.Fprintf(&b, "      - record: query:%d\n        expr: %q\n", i, grafanaMacros.Replace(e))
	}
	file := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(PromtoolBin, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\nrules:\n%s", err, out, b.String())
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(exprs)); !strings.Contains(string(out), want) {
		t.Fatalf("promtool check rules: %s, want %q", out, want)
	}
}
