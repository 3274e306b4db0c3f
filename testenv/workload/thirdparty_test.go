package workload_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

var loopback client.DialFunc = (&net.Dialer{}).DialContext

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs argv and waits until /work on addr answers 200.
func startProcess(t *testing.T, argv []string, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 200; i++ {
		if client.Get(context.Background(), loopback, addr, "/work", time.Second, nil).Outcome == client.OK {
			return cmd
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not answer /work on %s within 2 s", argv[0], addr)
	return nil
}

// checkGracefulStop: one /work answered, one slow request in flight, the
// stop signal; new connections are then refused while the slow request is
// still running, and it completes OK; the process exits 0.
func checkGracefulStop(t *testing.T, cmd *exec.Cmd, addr, slowPath string, stop os.Signal) {
	t.Helper()
	if r := client.Get(context.Background(), loopback, addr, "/work", time.Second, nil); r.Outcome != client.OK {
		t.Fatalf("/work: %s (%s)", r.Outcome, r.Err)
	}
	sent, slow := make(chan struct{}), make(chan client.Request, 1)
	go func() { slow <- client.Get(context.Background(), loopback, addr, slowPath, 5*time.Second, sent) }()
	<-sent
	time.Sleep(200 * time.Millisecond) // the slow request is being served
	if err := cmd.Process.Signal(stop); err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		refused = client.Get(context.Background(), loopback, addr, "/work", time.Second, nil).Outcome == client.Refused
		if !refused {
			time.Sleep(10 * time.Millisecond)
		}
	}
	select {
	case r := <-slow:
		t.Fatalf("slow request ended (%s) before a new connection was refused (refused=%v)", r.Outcome, refused)
	default:
	}
	if !refused {
		t.Fatal("no new connection refused within 1 s of the stop signal")
	}
	r := <-slow
	if r.Outcome != client.OK {
		t.Fatalf("slow request: %s (%s), want ok", r.Outcome, r.Err)
	}
	t.Logf("slow request took %s", r.Duration())
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after the stop signal: %v", err)
	}
}

func TestNginxQuitFinishesSlowAndRefuses(t *testing.T) {
	requireBinary(t, workload.NginxPath)
	addr := freeAddr(t)
	argv, err := workload.Nginx{Dir: t.TempDir(), Addr: addr, Slow: 1500}.Write()
	if err != nil {
		t.Fatal(err)
	}
	checkGracefulStop(t, startProcess(t, argv, addr), addr, "/slow", syscall.SIGQUIT)
}

func TestHAProxySoftStopFinishesSlowAndRefuses(t *testing.T) {
	requireBinary(t, workload.HAProxyPath)
	backend := freeAddr(t)
	stop, done := make(chan os.Signal), make(chan error, 1)
	go func() {
		cfg := workload.Config{Mode: workload.ModeNaive, Addr: backend, ShutdownTimeout: 5 * time.Second}
		done <- workload.New(cfg, zerolog.Nop()).Run(context.Background(), stop)
	}()
	t.Cleanup(func() { stop <- syscall.SIGTERM; <-done })
	addr := freeAddr(t)
	argv, err := workload.HAProxy{Dir: t.TempDir(), Addr: addr, Backend: backend}.Write()
	if err != nil {
		t.Fatal(err)
	}
	checkGracefulStop(t, startProcess(t, argv, addr), addr, "/slow?ms=1500", syscall.SIGUSR1)
}

// requireBinary fails (never skips) when a Debian package is missing:
// testenv/scripts/install-deps.sh installs it.
func requireBinary(t *testing.T, path string) {
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing: run testenv/scripts/install-deps.sh (%v)", path, err)
	}
}

// TestPythonHTTPDiesAtSIGTERM: CPython's http.server answers /work; SIGTERM
// kills it (no handler), after which connections are refused.
func TestPythonHTTPDiesAtSIGTERM(t *testing.T) {
	requireBinary(t, workload.PythonPath)
	addr := freeAddr(t)
	argv, err := workload.PythonHTTP{Dir: t.TempDir(), Addr: addr}.Write()
	if err != nil {
		t.Fatal(err)
	}
	cmd := startProcess(t, argv, addr)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("exit after SIGTERM: %v, want killed by SIGTERM", err)
	}
	if r := client.Get(context.Background(), loopback, addr, "/work", time.Second, nil); r.Outcome != client.Refused {
		t.Fatalf("/work after exit: %s, want refused", r.Outcome)
	}
}

// TestNodeUnderTiniDiesAtSIGTERM: tini forwards SIGTERM to node, which has
// no handler and dies of it with its slow request open; tini exits 143.
func TestNodeUnderTiniDiesAtSIGTERM(t *testing.T) {
	requireBinary(t, workload.NodePath)
	requireBinary(t, workload.TiniPath)
	addr := freeAddr(t)
	argv, err := workload.NodeHTTP{Dir: t.TempDir(), Addr: addr}.Write()
	if err != nil {
		t.Fatal(err)
	}
	cmd := startProcess(t, argv, addr)
	slow := make(chan client.Request, 1)
	sent := make(chan struct{})
	go func() {
		slow <- client.Get(context.Background(), loopback, addr, "/slow?ms=5000", 10*time.Second, sent)
	}()
	<-sent
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("tini exit code %d, want 143 (node died of SIGTERM)", code)
	}
	if r := <-slow; r.Outcome != client.EOF && r.Outcome != client.Reset {
		t.Errorf("slow request: %s, want eof or reset (the exit tore it down)", r.Outcome)
	}
}
