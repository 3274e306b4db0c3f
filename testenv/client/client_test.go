package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

var loopback DialFunc = (&net.Dialer{}).DialContext

// rawServer accepts on loopback and hands each connection, after its request
// line has been read, to handle.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					handle(c)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func respond(status int) func(net.Conn) {
	return func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", status)
		c.Close()
	}
}

func resetConn(c net.Conn) {
	_ = c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestOutcomes(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	cases := []struct {
		name   string
		target string
		want   Outcome
		status int
	}{
		{"ok", rawServer(t, respond(200)), OK, 200},
		{"status", rawServer(t, respond(503)), HTTPStatus(503), 503},
		{"refused", closedPort(t), Refused, 0},
		{"reset", rawServer(t, resetConn), Reset, 0},
		{"eof", rawServer(t, func(c net.Conn) { c.Close() }), EOF, 0},
		{"truncated body", rawServer(t, func(c net.Conn) {
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")
			c.Close()
		}), EOF, 200},
		{"timeout", rawServer(t, func(net.Conn) { <-hang }), Timeout, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Get(context.Background(), loopback, tc.target, "/work", 300*time.Millisecond, nil)
			if r.Outcome != tc.want || r.Status != tc.status {
				t.Fatalf("outcome %q status %d (err %q), want %q status %d", r.Outcome, r.Status, r.Err, tc.want, tc.status)
			}
			if r.Target != tc.target || r.End.Before(r.Start) {
				t.Fatalf("bad record %+v", r)
			}
		})
	}
}

// TestLoadIsBoundedAndExact: every 4th request answered 503, the rest 200.
func TestLoadIsBoundedAndExact(t *testing.T) {
	var n atomic.Int32
	addr := rawServer(t, func(c net.Conn) {
		if n.Add(1)%4 == 0 {
			respond(503)(c)
			return
		}
		respond(200)(c)
	})
	cases := []struct {
		name             string
		interval         time.Duration
		count            int
		duration         time.Duration
		planned, ok, bad int
	}{
		{"count bound", time.Millisecond, 20, time.Minute, 20, 15, 5},
		{"duration bound", 10 * time.Millisecond, 1000, 80 * time.Millisecond, 8, 6, 2},
	}
	for _, tc := range cases {
		n.Store(0)
		l := Load{Dial: loopback, Target: addr, Path: "/work", Interval: tc.interval, Count: tc.count, Duration: tc.duration}
		reqs, err := l.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s := Summarize(reqs)
		if len(reqs) != tc.planned || s[OK] != tc.ok || s[HTTPStatus(503)] != tc.bad || s.Total() != tc.planned {
			t.Errorf("%s: %d requests %v, want %d: ok=%d http_503=%d", tc.name, len(reqs), s, tc.planned, tc.ok, tc.bad)
		}
	}
	if _, err := (Load{Dial: loopback, Target: addr, Interval: time.Millisecond, Count: 5}).Run(context.Background()); err == nil {
		t.Error("a load without a duration bound ran")
	}
}
