package client

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestGRPCKilled: 3 unary Checks held 5 s, 2 Watch streams and 2 idle
// connections, the server (--ignore-stop) sent SIGTERM, which it ignores,
// and SIGKILLed 300 ms after every call is on its way:
// exactly the 3 unary calls and the 2 streams fail Unavailable; the idle
// connections make no call, so none fails, and both lose READY.
func TestGRPCKilled(t *testing.T) {
	addr, cmd := dwserver(t, "--mode=grpc", "--ignore-stop")
	run, err := GRPC{Dial: loopback, Target: addr, Unary: 3, Streams: 2, Idle: 2, Hold: 5 * time.Second, Duration: 3 * time.Second}.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	res := run.Wait()
	if got, want := res.String(), "idle OK=2 lost=2 | stream Unavailable=2 | unary Unavailable=3"; got != want {
		t.Fatalf("calls: %s, want %s", got, want)
	}
	for _, s := range res.Streams {
		if s.Messages < 1 {
			t.Errorf("stream got no status before the kill: %+v", s)
		}
	}
}

// TestGRPCUndisturbed: with the server alive the same workload ends as the
// client decides: Checks OK, streams ended by the client (DeadlineExceeded) at Duration,
// idle connections still READY.
func TestGRPCUndisturbed(t *testing.T) {
	addr, _ := dwserver(t, "--mode=grpc")
	run, err := GRPC{Dial: loopback, Target: addr, Unary: 3, Streams: 2, Idle: 2, Hold: 200 * time.Millisecond, Duration: 500 * time.Millisecond}.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := run.Wait().String(), "idle OK=2 | stream DeadlineExceeded=2 | unary OK=3"; got != want {
		t.Fatalf("calls: %s, want %s", got, want)
	}
}

// TestH2Killed: 3 idle HTTP/2 connections exchanging PINGs and 2 with a
// pending /slow, the h2c server SIGKILLed: the 2 pending requests end
// without a response, the 3 idle connections are closed under them — no
// request of theirs failed, they had none. Each ends as eof or reset: the
// kernel's FIN can be overtaken by the RST a PING written after it draws,
// so the test counts both as "connection lost".
func TestH2Killed(t *testing.T) {
	addr, cmd := dwserver(t, "--mode=h2c", "--ignore-stop")
	run, err := H2{Dial: loopback, Target: addr, Idle: 3, Pending: 2, Path: "/slow?ms=5000", Hold: 5 * time.Second}.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	res := run.Wait()
	idle, pending := SummarizeH2(res.Idle), SummarizeH2(res.Pending)
	if idle[EOF]+idle[Reset] != 3 || pending[EOF]+pending[Reset] != 2 {
		t.Fatalf("idle %s, pending %s: want all 3 and all 2 lost (eof or reset)", idle, pending)
	}
	for _, c := range res.Idle {
		if c.Pings < 1 {
			t.Errorf("idle connection had no PING acknowledged: %+v", c)
		}
	}
}

// TestH2Undisturbed: idle connections last their hold (OK), pending /slow
// requests are answered 200.
func TestH2Undisturbed(t *testing.T) {
	addr, _ := dwserver(t, "--mode=h2c")
	run, err := H2{Dial: loopback, Target: addr, Idle: 3, Pending: 2, Path: "/slow?ms=200", Hold: 500 * time.Millisecond}.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res := run.Wait()
	if got, want := SummarizeH2(res.Idle).String()+" | "+SummarizeH2(res.Pending).String(), "ok=3 | ok=2"; got != want {
		t.Fatalf("idle | pending: %s, want %s", got, want)
	}
}

// TestPipelineKilled: /slow then 2 /work pipelined on one connection to a
// server that ignores SIGTERM, SIGKILLed while /slow runs: none answered,
// all 3 end with the connection.
func TestPipelineKilled(t *testing.T) {
	addr, cmd := dwserver(t, "--mode=naive", "--ignore-stop")
	sent := make(chan struct{})
	done := make(chan []Request, 1)
	go func() {
		done <- Pipeline(context.Background(), loopback, addr, []string{"/slow?ms=3000", "/work", "/work"}, 5*time.Second, sent)
	}()
	<-sent
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := Summarize(<-done).String(); got != "eof=3" {
		t.Fatalf("pipelined: %s, want eof=3", got)
	}
}

// TestPipelineGraceful: the same pipeline, SIGTERM to a naive server
// (Shutdown): the running /slow is answered, then net/http closes the
// connection instead of reading the next request, so the 2 /work requests
// behind it end with an empty reply.
func TestPipelineGraceful(t *testing.T) {
	addr, cmd := dwserver(t, "--mode=naive")
	sent := make(chan struct{})
	done := make(chan []Request, 1)
	go func() {
		done <- Pipeline(context.Background(), loopback, addr, []string{"/slow?ms=500", "/work", "/work"}, 5*time.Second, sent)
	}()
	<-sent
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := Summarize(<-done).String(); got != "eof=2 ok=1" {
		t.Fatalf("pipelined: %s, want eof=2 ok=1", got)
	}
}
