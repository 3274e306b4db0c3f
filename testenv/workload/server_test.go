package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// start runs a server on a free loopback port and returns its base URL, the
// stop channel and the Run result.
func start(t *testing.T, cfg Config) (string, chan os.Signal, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = ln.Addr().String()
	ln.Close()
	stop, done := make(chan os.Signal, 1), make(chan error, 1)
	go func() { done <- New(cfg, zerolog.New(io.Discard)).Run(context.Background(), stop) }()
	base := "http://" + cfg.Addr
	for i := 0; i < 100; i++ {
		if code, _ := get(base + "/healthz"); code == 200 {
			return base, stop, done
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("server did not start within 1 s")
	return "", nil, nil
}

// get does one request on a fresh connection and returns the status, or 0
// and the error.
func get(url string) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestNaiveClosesListenerAtSignalAndFinishesInFlight(t *testing.T) {
	base, stop, done := start(t, Config{Mode: ModeNaive, ShutdownTimeout: 5 * time.Second, WorkDuration: 20 * time.Millisecond})
	slow := make(chan int, 1)
	go func() { code, _ := get(base + "/slow?ms=300"); slow <- code }()
	time.Sleep(50 * time.Millisecond) // let /slow be accepted before the signal
	stop <- syscall.SIGTERM
	time.Sleep(50 * time.Millisecond)
	if _, err := get(base + "/work"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("/work after SIGTERM: %v, want connection refused", err)
	}
	if code := <-slow; code != 200 {
		t.Fatalf("in-flight /slow got %d, want 200", code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestProtocolFailsReadinessAndServesDuringDrainDelay(t *testing.T) {
	base, stop, done := start(t, Config{Mode: ModeProtocol, DrainDelay: 400 * time.Millisecond, ShutdownTimeout: 5 * time.Second, WorkDuration: 20 * time.Millisecond})
	if code, err := get(base + "/ready"); code != 200 {
		t.Fatalf("/ready before SIGTERM = %d %v, want 200", code, err)
	}
	stop <- syscall.SIGTERM
	time.Sleep(50 * time.Millisecond)
	got := []string{}
	for _, path := range []string{"/ready", "/work"} {
		code, err := get(base + path)
		got = append(got, fmt.Sprint(path, " ", code, " ", err))
	}
	if want := "/ready 503 <nil>|/work 200 <nil>"; strings.Join(got, "|") != want {
		t.Fatalf("during drain delay: %s, want %s", strings.Join(got, "|"), want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := get(base + "/work"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("/work after drain: %v, want connection refused", err)
	}
}

func TestSlowDuration(t *testing.T) {
	for q, want := range map[string]string{"": "2s", "ms=150": "150ms", "ms=-1": "error", "ms=x": "error", "ms=999999999": "error"} {
		r, _ := http.NewRequest("GET", "/slow?"+q, nil)
		d, err := slowDuration(r)
		got := d.String()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("slowDuration(%q) = %s, want %s", q, got, want)
		}
	}
}

func TestShellCommandQuotes(t *testing.T) {
	got := ShellCommand("/tmp/dw server", []string{"--mode=naive", "it's"})
	want := []string{"/bin/sh", "-c", `'/tmp/dw server' '--mode=naive' 'it'\''s' & wait`}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("ShellCommand = %q, want %q", got, want)
	}
}

// TestShutdownShortReturnsWithRequestInFlight: the timeout expires before
// /slow finishes; Run returns the error and leaves the connection open for
// the process's exit to tear down (no Close, which would reset it while
// the process is alive).
func TestShutdownShortReturnsWithRequestInFlight(t *testing.T) {
	base, stop, done := start(t, Config{Mode: ModeShutdownShort, DrainDelay: 50 * time.Millisecond,
		ShutdownTimeout: 200 * time.Millisecond, WorkDuration: 20 * time.Millisecond})
	slow := make(chan int, 1)
	go func() { code, _ := get(base + "/slow?ms=1500"); slow <- code }()
	time.Sleep(50 * time.Millisecond)
	stop <- syscall.SIGTERM
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the shutdown's deadline", err)
	}
	select {
	case code := <-slow:
		t.Fatalf("/slow ended (%d) when Run returned: the connection was closed by the server", code)
	case <-time.After(100 * time.Millisecond):
	}
}
