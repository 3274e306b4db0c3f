// Package privileged decides whether a test that needs the real kernel or
// root can run. Outside CI it skips with the reason; in CI (CI=true, where the
// run is root) a missing privilege is a failure, never a silent skip.
package privileged

import (
	"os"
	"testing"
)

// InCI reports whether the tests run under .ci/run.
func InCI() bool { return os.Getenv("CI") == "true" }

// skipOrFail skips outside CI and fails in CI.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("privileged test cannot run in CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot stops the test unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (run: sudo make test)")
	}
}

// RequireFile stops the test unless path exists (BTF, tracefs, a binary).
func RequireFile(t testing.TB, path, why string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, "%s: %v", why, err)
	}
}
