package prometheus

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

const promtool = "/usr/bin/promtool"

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
