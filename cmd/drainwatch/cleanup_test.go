package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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

// TestCleanupRefusesFilesystemRoots: / and a bpffs mount root are refused
// before anything is listed or removed; a directory under one is not.
func TestCleanupRefusesFilesystemRoots(t *testing.T) {
	mountRoots := map[string]bool{"/run/bpf": true}
	isRoot := func(p string) bool { return mountRoots[p] }
	for path, refused := range map[string]bool{
		"/": true, "/sys/fs/bpf": true, "/sys/fs/bpf/": true, "/sys/fs/bpf/drainwatch/..": true, "/run/bpf": true,
		"/sys/fs/bpf/drainwatch": false, "/run/bpf/dw": false,
	} {
		err := checkPinRoot(path, isRoot)
		if (err != nil) != refused {
			t.Errorf("--pin-path %s: error %v, want refused %v", path, err, refused)
		}
	}
	var out, errOut bytes.Buffer
	if code := cleanupCmd([]string{"--pin-path", "/"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "--pin-path / is a filesystem's root") {
		t.Errorf("cleanup --pin-path /: exit %d, stderr %q", code, errOut.String())
	}
}

// TestIsMountRoot: /proc is a mount root on every Linux; a directory
// made by the test is not.
func TestIsMountRoot(t *testing.T) {
	if !isMountRoot("/proc") {
		t.Error("/proc is not seen as a mount root")
	}
	if dir := t.TempDir(); isMountRoot(dir) {
		t.Errorf("%s, made by the test, seen as a mount root", dir)
	}
}
