package controlplane

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestStartRetriesWhenAPortIsTaken: the first port handed out (etcd's client
// port) is held by the test; etcd exits with "address already in use" and
// Start starts again on new ports.
func TestStartRetriesWhenAPortIsTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the control plane")
	}
	if _, err := BinDir(); err != nil {
		if privileged.InCI() {
			t.Fatal(err)
		}
		t.Skip("needs the control plane; cptest.Get in the other tests reports why it is missing")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return held.Addr().(*net.TCPAddr).Port, nil
		}
		return pickFreePort()
	}
	defer func() { freePort = pickFreePort }()
	var logs strings.Builder
	cp, err := Start(context.Background(), Config{Dir: t.TempDir(), Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if !strings.Contains(logs.String(), "a port was taken; starting again") || strings.Count(logs.String(), "attempt") != 1 {
		t.Fatalf("want exactly one retry, logs:\n%s", logs.String())
	}
	if _, err := cp.Kubectl(context.Background(), "get", "--raw", "/readyz"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cp.Kubeconfig); err != nil {
		t.Fatal(err)
	}
}
