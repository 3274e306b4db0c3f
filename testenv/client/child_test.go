package client

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/workload"
)

// dwserver starts testenv's workload server as a child process on a free
// loopback port, so a test can SIGKILL it, and returns its address.
func dwserver(t *testing.T, args ...string) (string, *exec.Cmd) {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "drainwatch-client-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := workload.Build(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	addr := closedPort(t)
	cmd := exec.Command(bin, append([]string{"--addr=" + addr}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, cmd
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("dwserver %v did not listen within 2 s", args)
	return "", nil
}
