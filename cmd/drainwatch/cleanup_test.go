package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestCleanup: cleanup removes every node's pins under the pin path, and
// leaves alone (and reports) a node whose daemon runs.
func TestCleanup(t *testing.T) {
	privileged.RequireRoot(t)
	privileged.RequireFile(t, "/sys/kernel/btf/vmlinux", "kernel BTF")
	root := filepath.Join("/sys/fs/bpf", "drainwatch-cleanup-"+rand.String(6))
	t.Cleanup(func() { os.RemoveAll(root) })
	running, err := kernel.Open(kernel.Options{PinPath: filepath.Join(root, "node-a")})
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := kernel.Open(kernel.Options{PinPath: filepath.Join(root, "node-b")})
	if err != nil {
		running.Close()
		t.Fatal(err)
	}
	stopped.Close()
	var out, errOut bytes.Buffer
	if code := cleanupCmd([]string{"--pin-path", root}, &out, &errOut); code != 1 {
		t.Errorf("cleanup with a running daemon exited %d, want 1 (stderr %q)", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(root, "node-b")); !os.IsNotExist(err) {
		t.Errorf("the stopped daemon's pins are still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "node-a")); err != nil {
		t.Errorf("the running daemon's pins were removed: %v", err)
	}
	running.Close()
	out.Reset()
	if code := cleanupCmd([]string{"--pin-path", root, "--node-name", "node-a"}, &out, &errOut); code != 0 {
		t.Errorf("cleanup --node-name node-a exited %d: %s", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(root, "node-a")); !os.IsNotExist(err) {
		t.Errorf("node-a's pins are still there (%v); stdout %q", err, out.String())
	}
}
