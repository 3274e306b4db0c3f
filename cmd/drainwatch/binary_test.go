package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// binary is the test binary, which runs as drainwatch with
// DRAINWATCH_TEST_MAIN=1 (main_test.go).
func binary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func runBinary(t *testing.T, env []string, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = &o, &e, append(os.Environ(), append(env, "DRAINWATCH_TEST_MAIN=1")...)
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

func TestRunExtraArgumentSaysWhy(t *testing.T) {
	_, stderr, code := runBinary(t, nil, binary(t), "run", "extra-arg")
	want := `drainwatch run: drainwatch run takes no arguments, got ["extra-arg"]` + "\n"
	if code != 2 || stderr != want {
		t.Errorf("exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}

// TestKubectlPlugin: a kubectl-drainwatch on the PATH (a symlink to the
// binary) is `kubectl drainwatch` for the real kubectl.
func TestKubectlPlugin(t *testing.T) {
	bin, err := controlplane.BinDir()
	if err != nil {
		if privileged.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(binary(t), filepath.Join(dir, "kubectl-drainwatch")); err != nil {
		t.Fatal(err)
	}
	path := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	stdout, stderr, code := runBinary(t, path, filepath.Join(bin, "kubectl"), "drainwatch", "version")
	if code != 0 || !strings.HasPrefix(stdout, "drainwatch ") {
		t.Errorf("kubectl drainwatch version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stderr, code = runBinary(t, path, filepath.Join(bin, "kubectl"), "drainwatch", "timeline", "-n", "shop", "--since=-5m", "--url", "http://127.0.0.1:1")
	want := `drainwatch timeline: since="-5m" is negative: give how far back, like 5m0s` + "\n"
	if code != 2 || stderr != want {
		t.Errorf("kubectl drainwatch timeline --since=-5m: exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}
