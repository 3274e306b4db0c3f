package exporter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
)

// floodLimits are DefaultLimits scaled down, so that the test waits for
// each timeout in seconds, not minutes.
var floodLimits = Limits{ReadHeader: 2 * time.Second, Read: 3 * time.Second, Write: 3 * time.Second,
	Idle: 2 * time.Second, MaxHeaderBytes: DefaultLimits.MaxHeaderBytes, Lists: 2}

// closeMargin is how much longer than its timeout a connection may take
// to be closed: generous, the timeouts are what is tested, not the clock.
const closeMargin = 5 * time.Second

// gatedSource holds the list requests of namespace "held" until gate is
// closed, so that the test knows when every list slot is taken.
type gatedSource struct {
	fakeSource
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedSource) EachMatching(f Filter, fn func(correlate.Termination)) {
	if f.Namespace == "held" {
		g.entered <- struct{}{}
		<-g.gate
		return
	}
	for _, t := range g.fakeSource {
		if f.Match(t) {
			fn(t)
		}
	}
}

// TestFloodOfSlowAndLargeRequests serves 3,000 terminations on loopback
// with the real server (its timeouts, header limit, body refusal and list
// gate) while 40 connections declare a body they never send, 40 send their
// headers a byte at a time, 5 send headers over the limit and one stays
// idle after a request; the list slots are taken and more lists asked for.
// Each flood connection gets its exact answer and is closed within its
// timeout, every excess list exactly one 429 and one count, a client still
// reads every termination exactly once, and the heap grows by no more
// than the limits allow.
func TestFloodOfSlowAndLargeRequests(t *testing.T) {
	const terminations, bodies, slow, large, excess = 3000, 40, 40, 5, 10
	src := &gatedSource{fakeSource: manyTerminations(terminations), entered: make(chan struct{}), gate: make(chan struct{})}
	for i := range src.fakeSource {
		src.fakeSource[i].Connections = make([]correlate.ConnPoint, 64)
	}
	metrics := NewMetrics(Options{})
	addr := serveOnLoopback(t, NewServer(ServerConfig{Source: src, Metrics: metrics, Log: zerolog.Nop(), Limits: floodLimits}))
	before := heapInUse()

	var wg sync.WaitGroup
	flood := func(n int, name string, fn func(net.Conn) error) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := withConn(addr, fn); err != nil {
					t.Errorf("%s %d: %v", name, i, err)
				}
			}()
		}
	}
	flood(bodies, "declared body", bodyNeverSent)
	flood(slow, "slow headers", headersByteByByte)
	flood(large, "large headers", headersOverTheLimit)
	flood(1, "idle keep-alive", idleAfterARequest)

	held := holdListSlots(t, addr, src)
	if got := askExcessLists(t, addr, excess); got != excess+1 {
		t.Errorf("%d excess lists answered 429, want %d", got, excess+1)
	}
	during := heapInUse()
	close(src.gate)
	held.Wait()
	if got := testutil.ToFloat64(metrics.self.throttled); got != excess+1 {
		t.Errorf("drainwatch_api_lists_throttled_total %v, want %d", got, excess+1)
	}
	listEachOnce(t, addr, src.fakeSource)
	wg.Wait()
	after := heapInUse()
	conns := bodies + slow + large + 1
	// Each connection: its header buffer, bufio's reader and writer, its
	// goroutine and state (a generous 64 KiB); each list slot: a page of
	// MaxPageSize terminations at 4 KiB and pagePoints connection points,
	// twice (the page and what encoding it holds).
	bound := uint64(conns*(floodLimits.MaxHeaderBytes+64<<10) + floodLimits.Lists*2*(MaxPageSize*4<<10+pagePoints*32))
	t.Logf("heap in use: %d KiB before, %d KiB during the flood, %d KiB after; bound %d KiB", before>>10, during>>10, after>>10, bound>>10)
	if during > before+bound || after > before+bound {
		t.Errorf("heap grew from %d KiB to %d KiB (after %d KiB): more than the limits allow (%d KiB)", before>>10, during>>10, after>>10, bound>>10)
	}
}

// serveOnLoopback serves s on 127.0.0.1 until the test ends.
func serveOnLoopback(t *testing.T, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return l.Addr().String()
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// withConn dials addr and runs fn on the connection.
func withConn(addr string, fn func(net.Conn) error) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// bodyNeverSent declares a 1 MiB body and sends none: 413 at once, then
// the server closes.
func bodyNeverSent(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(floodLimits.Read + closeMargin)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET /api/v1/terminations HTTP/1.1\r\nHost: dw\r\nContent-Length: 1048576\r\n\r\n"); err != nil {
		return err
	}
	return expectAnswerThenClose(c, http.StatusRequestEntityTooLarge)
}

// headersOverTheLimit sends a 32 KiB header: 431, then the server closes.
func headersOverTheLimit(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(floodLimits.ReadHeader + closeMargin)); err != nil {
		return err
	}
	req := "GET /api/v1/terminations HTTP/1.1\r\nHost: dw\r\nX-Large: " + strings.Repeat("a", 32<<10) + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	return expectAnswerThenClose(c, http.StatusRequestHeaderFieldsTooLarge)
}

// idleAfterARequest asks /healthz, then stays idle: the server closes
// the connection after its idle timeout.
func idleAfterARequest(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(floodLimits.Idle + closeMargin)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: dw\r\n\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		return fmt.Errorf("/healthz: %s, close %v, %v: want 200 kept alive", resp.Status, resp.Close, err)
	}
	return expectClosed(r, "after idling")
}

// expectAnswerThenClose reads one answer with the status want, then the
// end of the connection.
func expectAnswerThenClose(c net.Conn, want int) error {
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != want || (err != nil && !isReset(err)) {
		return fmt.Errorf("%s (%v), want %d", resp.Status, err, want)
	}
	return expectClosed(r, "after the answer")
}

// expectClosed reads the end of the connection (EOF, or a reset when the
// server closed with bytes of ours unread); a byte, or our deadline
// first, is an error.
func expectClosed(r *bufio.Reader, when string) error {
	b, err := r.ReadByte()
	switch {
	case err == nil:
		return fmt.Errorf("%s: the server sent %q, want the connection closed", when, b)
	case errors.Is(err, io.EOF), isReset(err):
		return nil
	case errors.Is(err, syscall.ETIMEDOUT), isTimeout(err):
		return fmt.Errorf("%s: still open at our deadline (its timeout + %s)", when, closeMargin)
	}
	return fmt.Errorf("%s: %w", when, err)
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
