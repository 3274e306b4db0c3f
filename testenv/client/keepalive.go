package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KeepAlive is a connection pool as an upstream proxy keeps one: Conns
// keep-alive connections to Target, each sending one GET every Interval
// and reusing its connection for the next while the last response came
// whole and without `Connection: close`. It never retries and never watches an idle connection for the
// server's FIN, so a request sent on a connection the server has closed is
// lost, recorded with Reused set and outcome EOF (the server's FIN is read
// first); ServerReset says whether the server's kernel then answered it
// with a RST (it does while the closed connection's socket exists; not
// once the pod's network namespace is gone). Each
// connection's loop is bounded by Count and Duration, and ends at the first
// failed connect (the server is gone or refusing).
type KeepAlive struct {
	Dial     DialFunc
	Target   string
	Path     string
	Conns    int
	Interval time.Duration
	Count    int           // requests per connection slot, at most
	Duration time.Duration // per slot, at most
	Timeout  time.Duration // per request; 2 s when zero
}

// ResetOnReuse says whether r is a request lost on a reused connection the
// server had closed: what drainwatch counts as
// requests_reset_on_reused_connections.
func ResetOnReuse(r Request) bool { return r.Reused && r.Outcome == EOF && r.ServerReset }

// Run runs every slot and returns all their requests.
func (k KeepAlive) Run(ctx context.Context) []Request {
	var mu sync.Mutex
	var all []Request
	var wg sync.WaitGroup
	for i := range k.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Slots start spread over one Interval, as a proxy's pool is
			// used: at any instant some connections were just used and some
			// have been idle for most of the Interval.
			if !sleepUntil(ctx, time.Now().Add(time.Duration(i)*k.Interval/time.Duration(k.Conns))) {
				return
			}
			reqs := k.slot(ctx)
			mu.Lock()
			all = append(all, reqs...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}

// slot is one pooled connection's loop.
func (k KeepAlive) slot(ctx context.Context) []Request {
	var reqs []Request
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	start := time.Now()
	for i := 0; i < k.Count && time.Since(start) < k.Duration && ctx.Err() == nil; i++ {
		r := Request{Seq: i, Path: k.Path, Target: k.Target, Start: time.Now(), Reused: conn != nil}
		if conn == nil {
			c, err := k.dial(ctx)
			if err != nil {
				r.fail(err)
				r.End = time.Now()
				return append(reqs, r)
			}
			conn, br = c, bufio.NewReader(c)
		}
		r.Local = conn.LocalAddr().String()
		if keep := k.get(conn, br, &r); !keep {
			conn.Close()
			conn = nil
		}
		reqs = append(reqs, r)
		if !sleepUntil(ctx, r.Start.Add(k.Interval)) {
			break
		}
	}
	return reqs
}

func (k KeepAlive) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout())
	defer cancel()
	return k.Dial(ctx, "tcp", k.Target)
}

// get sends one keep-alive request on conn and reads its response; keep
// says whether the connection may carry the next one: a whole 2xx response
// without `Connection: close`, which a pool honours.
func (k KeepAlive) get(conn net.Conn, br *bufio.Reader, r *Request) (keep bool) {
	defer func() { r.End = time.Now() }()
	_ = conn.SetDeadline(time.Now().Add(k.timeout()))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", k.Path, k.Target); err != nil {
		r.fail(err)
		return false
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		r.fail(err)
		if r.Reused && r.Outcome == EOF {
			r.ServerReset = awaitReset(conn)
		}
		return false
	}
	defer resp.Body.Close()
	r.Status = resp.StatusCode
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		r.fail(err)
		return false
	}
	r.Outcome = OK
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.Outcome = HTTPStatus(resp.StatusCode)
	}
	return r.Outcome == OK && !resp.Close
}

func (k KeepAlive) timeout() time.Duration {
	if k.Timeout == 0 {
		return 2 * time.Second
	}
	return k.Timeout
}

// awaitReset waits (at most a second) for the peer's RST on a connection
// whose FIN was read: the socket leaves CLOSE_WAIT for CLOSE when a RST
// arrives, and stays in CLOSE_WAIT when nothing answers the request.
func awaitReset(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	for range 200 {
		var state uint8
		_ = raw.Control(func(fd uintptr) {
			if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				state = info.State
			}
		})
		if state == unix.BPF_TCP_CLOSE {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}
