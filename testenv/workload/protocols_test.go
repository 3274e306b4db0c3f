package workload_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// serve runs a workload server in-process on a free loopback port until
// its stop channel gets a signal.
func serve(t *testing.T, cfg workload.Config) (string, chan os.Signal, chan error) {
	t.Helper()
	cfg.Addr = freeAddr(t)
	stop, done := make(chan os.Signal, 1), make(chan error, 1)
	go func() { done <- workload.New(cfg, zerolog.Nop()).Run(context.Background(), stop) }()
	for i := 0; i < 200; i++ {
		if c, err := loopback(context.Background(), "tcp", cfg.Addr); err == nil {
			c.Close()
			return cfg.Addr, stop, done
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s server did not listen within 2 s", cfg.Mode)
	return "", nil, nil
}

// TestH2CShutdown: 2 idle HTTP/2 connections and 2 with a pending /slow,
// SIGTERM: every connection gets a GOAWAY, both requests are answered 200,
// the idle connections are closed by the server after the GOAWAY, a new
// connection is refused, and Run returns once the connections have ended.
func TestH2CShutdown(t *testing.T) {
	addr, stop, done := serve(t, workload.Config{Mode: workload.ModeH2C, ShutdownTimeout: 5 * time.Second})
	run, err := client.H2{Dial: loopback, Target: addr, Idle: 2, Pending: 2, Path: "/slow?ms=600", Hold: 3 * time.Second}.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	stop <- syscall.SIGTERM
	time.Sleep(100 * time.Millisecond)
	if r := client.Get(context.Background(), loopback, addr, "/work", time.Second, nil); r.Outcome != client.Refused {
		t.Errorf("new connection after SIGTERM: %s, want refused", r.Outcome)
	}
	res := run.Wait()
	idle, pending := client.SummarizeH2(res.Idle), client.SummarizeH2(res.Pending)
	if idle.String() != "goaway=2" || pending.String() != "ok=2" {
		t.Fatalf("idle %s, pending %s: want goaway=2, ok=2", idle, pending)
	}
	for _, c := range append(res.Idle, res.Pending...) {
		if !c.GoAway {
			t.Errorf("connection without GOAWAY: %+v", c)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestGRPCGracefulStop: 3 unary Checks held 600 ms, 2 Watch streams, 2
// idle connections, SIGTERM. GracefulStop finishes the 3 calls. With
// EndStreams the streams end OK at the signal and Run returns nil; without,
// they hold GracefulStop until ShutdownTimeout (1 s), then Stop cuts them
// (Unavailable) and Run says so. The idle connections lose READY (GOAWAY),
// no call of theirs fails.
func TestGRPCGracefulStop(t *testing.T) {
	for _, tc := range []struct {
		endStreams bool
		want       string
		runErr     bool
	}{
		{true, "idle OK=2 lost=2 | stream OK=2 | unary OK=3", false},
		{false, "idle OK=2 lost=2 | stream Unavailable=2 | unary OK=3", true},
	} {
		addr, stop, done := serve(t, workload.Config{Mode: workload.ModeGRPC, ShutdownTimeout: time.Second, EndStreams: tc.endStreams})
		run, err := client.GRPC{Dial: loopback, Target: addr, Unary: 3, Streams: 2, Idle: 2, Hold: 600 * time.Millisecond, Duration: 3 * time.Second}.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		stop <- syscall.SIGTERM
		if got := run.Wait().String(); got != tc.want {
			t.Errorf("end streams %v: %s, want %s", tc.endStreams, got, tc.want)
		}
		if err := <-done; (err != nil) != tc.runErr {
			t.Errorf("end streams %v: Run returned %v", tc.endStreams, err)
		}
	}
}
