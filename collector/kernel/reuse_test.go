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
//
// The server closes them after idleFor without data: each close is one
// idle_close with its accept's cookie and an idle time between what the
// client's clock bounds (the request sent, the response read, the close
// asked for and seen), to a jiffy; the correlator matches each reset to
// its close, and the pool's idle (the reset's time minus the connection's
// last data) lies between the client's bounds too.
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
	time.Sleep(idleFor) // the connections' idle time before the server closes them (not an assertion)
	closeAsked := time.Now()
	idle.closeIdle(t, closing)
	closeSeen := time.Now()
	time.Sleep(idleFor) // the pool keeps them idle longer than the server did
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
	tick, err := kernelTick()
	must(t, err)
	checkIdleCloses(t, evs, srv, pool[:closedIdle], closeAsked, closeSeen, tick)
	// The pool's idle: from the connection's last data (the server's
	// answer, between the first request's send and its response's read)
	// to the reset (between the second request's send and its error).
	var poolMin, poolMax time.Duration
	for _, c := range pool[:closedIdle] {
		poolMin = max(poolMin, c.sent[1].Sub(c.read[0])-tick)
		poolMax = max(poolMax, c.read[1].Sub(c.sent[0])+tick)
	}
	steady, term, ka := correlateReuse(evs, srv)
	t.Logf("keep-alive: %+v; the pool's idle max between %v and %v", ka, poolMin, poolMax)
	for name, k := range map[string]correlate.KeepAlive{"outside a termination": ka, "in a termination": term.KeepAlive} {
		if k.IdleCloses != closedIdle || k.PoolReuses != closedIdle || k.PoolIdleMax < poolMin || k.PoolIdleMax > poolMax {
			t.Errorf("%s: keep-alive %+v; want %d idle closes, %d pool reuses, pool idle max in [%v, %v]", name, k, closedIdle, closedIdle, poolMin, poolMax)
		}
	}
	if want := []correlate.WorkloadCount{{Workload: reuseWorkload, N: closedIdle}}; !slices.Equal(steady, want) {
		t.Errorf("outside a termination: %v, want %v", steady, want)
	}
	if c := term.Counts; c.RequestsResetOnReusedConnections != closedIdle || c.ConnectionsResetAtShutdown != 0 ||
		c.RequestsKilledBySigkill != 0 || c.ConnectionsResetAtExit != 0 {
		t.Errorf("in a termination: reset on reuse %d, at shutdown %d, killed %d, at exit %d; want %d, 0, 0, 0",
			c.RequestsResetOnReusedConnections, c.ConnectionsResetAtShutdown, c.RequestsKilledBySigkill, c.ConnectionsResetAtExit, closedIdle)
	}
}

// idleFor is how long the test's connections stay idle before the server
// closes them, and after that before the pool reuses them: past
// IdleCloseMin.
const idleFor = 300 * time.Millisecond

// checkIdleCloses checks one idle_close per connection the server closed
// idle, none for another, each with its accept's cookie, the server's
// task, and an idle time between the client's bounds to a jiffy: from its
// last data (between the request's send and the response's read) to the
// close (between asking for it and seeing it).
func checkIdleCloses(t *testing.T, evs []collector.Event, srv uint32, closed []*poolConn, asked, seen time.Time, tick time.Duration) {
	t.Helper()
	accepted := map[uint16]uint64{}
	byPort := map[uint16][]collector.Event{}
	for _, ev := range evs {
		switch {
		case ev.NetnsIno != srv:
		case ev.Type == collector.EventAccept:
			accepted[ev.Remote.Port()] = ev.SockCookie
		case ev.Type == collector.EventIdleClose:
			byPort[ev.Remote.Port()] = append(byPort[ev.Remote.Port()], ev)
		}
	}
	if len(byPort) != len(closed) {
		t.Errorf("idle closes from %d connections, want %d: %v", len(byPort), len(closed), byPort)
	}
	for _, c := range closed {
		got := byPort[c.port()]
		if len(got) != 1 {
			t.Errorf("connection from port %d: %d idle closes, want 1", c.port(), len(got))
			continue
		}
		ev := got[0]
		lo, hi := asked.Sub(c.read[0])-tick, seen.Sub(c.sent[0])+tick
		if ev.SockCookie != accepted[c.port()] || ev.PID == 0 || ev.Idle() < lo || ev.Idle() > hi {
			t.Errorf("idle close %+v (idle %v): want its accept's cookie %d, the server's pid, idle in [%v, %v]",
				ev, ev.Idle(), accepted[c.port()], lo, hi)
		}
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
// termination, completed), and the steady pod's keep-alive measurements
// (read from a termination that begins after the events).
func correlateReuse(evs []collector.Event, netns uint32) ([]correlate.WorkloadCount, correlate.Termination, correlate.KeepAlive) {
	first, last := evs[0].Time, evs[len(evs)-1].Time
	pod := collector.Pod{UID: "keepalive", Namespace: "lab", Name: "keepalive-0", Node: "lab", GracePeriod: 30 * time.Second,
		Workload: reuseWorkload, Containers: []collector.Container{{Name: "app", ID: strings.Repeat("c", 64)}}, Ready: true}
	pod.Workload.Revision = "1"
	deleted := func(c *correlate.Correlator, seen time.Time) {
		p := pod
		p.DeletionTimestamp, p.DeletionGracePeriod, p.Ready = seen.Add(30*time.Second), 30*time.Second, false
		c.Pod(collector.PodUpdate{Seen: seen, Pod: p})
	}
	run := func(deleting bool) *correlate.Correlator {
		c := correlate.New(correlate.DefaultConfig())
		c.Pod(collector.PodUpdate{Seen: first.Add(-2 * time.Second), Pod: pod})
		c.BindNetns(pod.UID, netns)
		if deleting {
			deleted(c, first.Add(-time.Second))
		}
		for _, e := range evs {
			c.Kernel(e)
		}
		return c
	}
	find := func(c *correlate.Correlator) correlate.Termination {
		c.PodDeleted(collector.PodDeleted{Seen: last.Add(2 * time.Millisecond), UID: pod.UID})
		for _, term := range c.Tick(last.Add(time.Hour)) {
			if term.PodUID == pod.UID {
				return term
			}
		}
		return correlate.Termination{}
	}
	sc := run(false)
	steady := sc.TakeSteadyReuseResets()
	deleted(sc, last.Add(time.Millisecond))
	return steady, find(run(true)), find(sc).KeepAlive
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
	// sent and read are when each of its first two requests was sent and
	// its response read (or its error returned).
	sent, read [2]time.Time
	n          int
}

func dialPooled(t *testing.T, l *lab) *poolConn {
	c := mustDial(t, l)
	return &poolConn{c: c, r: bufio.NewReader(c)}
}

func (p *poolConn) port() uint16 { return uint16(p.c.LocalAddr().(*net.TCPAddr).Port) }

// get sends one request and reads its response, bounded in time.
func (p *poolConn) get() error {
	if p.n < len(p.sent) {
		i := p.n
		p.n++
		p.sent[i] = time.Now()
		defer func() { p.read[i] = time.Now() }()
	}
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
