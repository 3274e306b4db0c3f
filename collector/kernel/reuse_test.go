package kernel

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// TestResetsOnReusedConnections: a client keeps a pool of N keep-alive
// connections to a real Go net/http server; the server closes K of them
// idle (their idle read times out, as with IdleTimeout) and the client,
// unaware, sends its next request on every pooled connection. Exactly K
// requests get no response, and the server's kernel answers exactly those
// K with a RST of the connection's socket (cookie of its accept) with the
// reason of data meeting a closed connection: TCP_ABORT_ON_DATA (the
// orphan) or TCP_TIMEWAIT_SOCKET (its timewait socket). Nothing else: no
// RST without a socket, no in-flight close. Fed to the correlator they are
// K requests reset on reused connections, outside a termination for the
// workload and inside one for the termination, and none is a reset at
// shutdown.
func TestResetsOnReusedConnections(t *testing.T) {
	const pooled, closedIdle = 6, 4
	l := newLab(t)
	// Detail: accepts as records, for their cookies.
	k := openTestKernel(t, Options{Detail: true})
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	idle := serveKeepAlive(t, l)
	pool := make([]*poolConn, pooled)
	for i := range pool {
		pool[i] = dialPooled(t, l)
		must(t, pool[i].get())
	}
	closing := map[uint16]bool{}
	for _, c := range pool[:closedIdle] {
		closing[c.port()] = true
	}
	idle.closeIdle(t, closing)
	lost := 0
	for _, c := range pool {
		if err := c.get(); err != nil {
			lost++
			if !closing[c.port()] {
				t.Errorf("request on a connection the server kept lost: %v", err)
			}
		}
	}
	if lost != closedIdle {
		t.Fatalf("client lost %d requests on reused connections, want %d", lost, closedIdle)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventReset, srv) >= closedIdle })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	checkReuseResets(t, evs, srv, closing)
	steady, term := correlateReuse(evs, srv)
	if want := []correlate.WorkloadCount{{Workload: reuseWorkload, N: closedIdle}}; !slices.Equal(steady, want) {
		t.Errorf("outside a termination: %v, want %v", steady, want)
	}
	if c := term.Counts; c.RequestsResetOnReusedConnections != closedIdle || c.ConnectionsResetAtShutdown != 0 ||
		c.RequestsKilledBySigkill != 0 || c.ConnectionsResetAtExit != 0 {
		t.Errorf("in a termination: reset on reuse %d, at shutdown %d, killed %d, at exit %d; want %d, 0, 0, 0",
			c.RequestsResetOnReusedConnections, c.ConnectionsResetAtShutdown, c.RequestsKilledBySigkill, c.ConnectionsResetAtExit, closedIdle)
	}
}

// checkReuseResets checks that the server's RSTs are exactly one per
// closed connection, each with that connection's accept cookie and a
// reason of data on a closed connection, and that nothing was in flight.
func checkReuseResets(t *testing.T, evs []collector.Event, srv uint32, closing map[uint16]bool) {
	t.Helper()
	accepted := map[uint16]uint64{}
	for _, ev := range evs {
		if ev.Type == collector.EventAccept && ev.NetnsIno == srv {
			accepted[ev.Remote.Port()] = ev.SockCookie
		}
	}
	reset := map[uint16]int{}
	for _, ev := range evs {
		switch {
		case ev.NetnsIno != srv:
		case ev.Type == collector.EventConnClosedInflight || ev.Type == collector.EventRefused:
			t.Errorf("unexpected %s: %+v", ev.Type, ev)
		case ev.Type == collector.EventReset:
			port := ev.Remote.Port()
			reset[port]++
			if !closing[port] || ev.SockCookie == 0 || ev.SockCookie != accepted[port] || (ev.Reason != 8 && ev.Reason != 9) || ev.PID != 0 {
				t.Errorf("reset %+v: want one per closed connection, its accept's cookie %d, reason 8 or 9, in softirq", ev, accepted[port])
			}
		}
	}
	for port := range closing {
		if reset[port] != 1 {
			t.Errorf("connection from port %d: %d resets, want 1", port, reset[port])
		}
	}
}

var reuseWorkload = collector.Workload{Namespace: "lab", Kind: "Deployment", Name: "keepalive"}

// correlateReuse feeds evs to two correlators with the server's pod bound
// to its namespace: one where the pod is not terminating (the steady
// counts it reports), one where its deletion came before the events (the
// termination, completed).
func correlateReuse(evs []collector.Event, netns uint32) ([]correlate.WorkloadCount, correlate.Termination) {
	first, last := evs[0].Time, evs[len(evs)-1].Time
	pod := collector.Pod{UID: "keepalive", Namespace: "lab", Name: "keepalive-0", Node: "lab", GracePeriod: 30 * time.Second,
		Workload: reuseWorkload, Containers: []collector.Container{{Name: "app", ID: strings.Repeat("c", 64)}}, Ready: true}
	pod.Workload.Revision = "1"
	run := func(deleting bool) *correlate.Correlator {
		c := correlate.New(correlate.DefaultConfig())
		c.Pod(collector.PodUpdate{Seen: first.Add(-2 * time.Second), Pod: pod})
		c.BindNetns(pod.UID, netns)
		if deleting {
			p := pod
			p.DeletionTimestamp, p.DeletionGracePeriod, p.Ready = first.Add(29*time.Second), 30*time.Second, false
			c.Pod(collector.PodUpdate{Seen: first.Add(-time.Second), Pod: p})
		}
		for _, e := range evs {
			c.Kernel(e)
		}
		return c
	}
	steady := run(false).TakeSteadyReuseResets()
	c := run(true)
	c.PodDeleted(collector.PodDeleted{Seen: last.Add(time.Millisecond), UID: pod.UID})
	for _, term := range c.Tick(last.Add(time.Hour)) {
		if term.PodUID == pod.UID {
			return steady, term
		}
	}
	return steady, correlate.Termination{}
}

// keepAliveServer is a Go net/http server in the lab's server namespace
// that keeps connections alive, and closes chosen idle ones the way its
// IdleTimeout would: their idle read times out.
type keepAliveServer struct {
	mu     sync.Mutex
	idle   map[uint16]net.Conn // by client port
	closed chan uint16
}

func serveKeepAlive(t *testing.T, l *lab) *keepAliveServer {
	t.Helper()
	s := &keepAliveServer{idle: map[uint16]net.Conn{}, closed: make(chan uint16, 64)}
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	must(t, err)
	hs := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }),
		ConnState: s.track,
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return s
}

func (s *keepAliveServer) track(c net.Conn, st http.ConnState) {
	port := uint16(c.RemoteAddr().(*net.TCPAddr).Port)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateIdle:
		s.idle[port] = c
	case http.StateActive:
		delete(s.idle, port)
	case http.StateClosed:
		s.closed <- port
	}
}

// closeIdle times out the idle reads of the connections from ports and
// waits (bounded) until the server has closed each of them. A connection
// turns idle on the server just after its response reached the client:
// each is waited for (bounded) first.
func (s *keepAliveServer) closeIdle(t *testing.T, ports map[uint16]bool) {
	t.Helper()
	for port := range ports {
		c := s.waitIdle(port)
		if c == nil {
			t.Fatalf("connection from port %d did not turn idle on the server within 5s", port)
		}
		c.SetReadDeadline(time.Now())
	}
	for range ports {
		select {
		case port := <-s.closed:
			if !ports[port] {
				t.Fatalf("server closed the connection from port %d, not one it was told to", port)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("server did not close its idle connections within 5s")
		}
	}
}

func (s *keepAliveServer) waitIdle(port uint16) net.Conn {
	for range 500 {
		s.mu.Lock()
		c := s.idle[port]
		s.mu.Unlock()
		if c != nil {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// poolConn is one pooled keep-alive connection of a raw HTTP/1.1 client:
// no retry, so a request lost on a reused connection is an error here.
type poolConn struct {
	c *net.TCPConn
	r *bufio.Reader
}

func dialPooled(t *testing.T, l *lab) *poolConn {
	c := mustDial(t, l)
	return &poolConn{c: c, r: bufio.NewReader(c)}
}

func (p *poolConn) port() uint16 { return uint16(p.c.LocalAddr().(*net.TCPAddr).Port) }

// get sends one request and reads its response, bounded in time.
func (p *poolConn) get() error {
	p.c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(p.c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", serverIP); err != nil {
		return err
	}
	resp, err := http.ReadResponse(p.r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}
