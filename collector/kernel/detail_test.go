package kernel

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestAcceptsHeldUntilDetail: a watched namespace without detail sends no
// accept record; the kernel counts every accept, the kubelet's probes apart,
// and holds the latest client accepts with their cookies. With detail each
// accept is a record and the held history stops moving; without it again
// the history resumes. Counts are exact against the connections made and
// the cookies the server's sockets report.
func TestAcceptsHeldUntilDetail(t *testing.T) {
	const held, probes, detailed, after = 2000, 7, 150, 40
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	must(t, k.WatchAddr(netip.MustParseAddr(serverIP)))
	must(t, k.SetProbeComms([]string{"kubelet"}))
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	cookies := acceptCookies(ln)
	for i := 0; i < probes; i++ {
		connectAs(t, l, "kubelet", 8080, nil)
	}
	dialN(t, l, held)
	served := waitCookies(t, cookies, probes+held)
	if evs := drain(k, 300*time.Millisecond); countType(evs, collector.EventAccept, 0) != 0 {
		t.Fatalf("%d accept records without detail, want 0", countType(evs, collector.EventAccept, 0))
	}
	s := scopeAccepts(t, k, srv)
	if s.Accepts != probes+held || s.Probes != probes || s.Held != held {
		t.Fatalf("accepts %d probes %d held %d; want %d, %d, %d", s.Accepts, s.Probes, s.Held, probes+held, probes, held)
	}
	heldServed := served[probes:]
	checkRecent(t, s, heldServed)

	must(t, k.SetDetail(srv, true))
	dialN(t, l, detailed)
	served = waitCookies(t, cookies, detailed)
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventAccept, srv) >= detailed })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	if n := countType(evs, collector.EventAccept, srv); n != detailed {
		t.Fatalf("%d accept records with detail, want %d", n, detailed)
	}
	for i, c := range served {
		if got := nthAcceptCookie(evs, i); got != c {
			t.Fatalf("accept record %d has cookie %d, the server's socket %d", i, got, c)
		}
	}
	frozen := scopeAccepts(t, k, srv)
	if frozen.Accepts != probes+held+detailed || frozen.Held != held || !slices.Equal(frozen.Recent, s.Recent) {
		t.Fatalf("with detail: accepts %d held %d (history changed: %v); want %d and %d, unchanged",
			frozen.Accepts, frozen.Held, !slices.Equal(frozen.Recent, s.Recent), probes+held+detailed, held)
	}

	must(t, k.SetDetail(srv, false))
	dialN(t, l, after)
	served = waitCookies(t, cookies, after)
	// The held accepts are the first and the last batch (the detailed ones
	// were sent): with the accepts spread over CPUs, the history since its
	// floor may reach back into the first batch.
	heldServed = append(slices.Clone(heldServed), served...)
	if evs := drain(k, 300*time.Millisecond); countType(evs, collector.EventAccept, 0) != 0 {
		t.Fatalf("%d accept records after detail ended, want 0", countType(evs, collector.EventAccept, 0))
	}
	s = scopeAccepts(t, k, srv)
	if s.Accepts != probes+held+detailed+after || s.Held != held+after {
		t.Fatalf("after detail: accepts %d held %d; want %d and %d", s.Accepts, s.Held, probes+held+detailed+after, held+after)
	}
	checkRecent(t, s, heldServed)
	ln.Close()
}

// TestFewAcceptsHeldComplete: fewer accepts than one CPU's ring are all
// held, in order, with no completeness floor.
func TestFewAcceptsHeldComplete(t *testing.T) {
	const n = 20
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cookies := acceptCookies(ln)
	start := time.Now()
	dialN(t, l, n)
	served := waitCookies(t, cookies, n)
	s := scopeAccepts(t, k, srv)
	if s.Accepts != n || s.Held != n || len(s.Recent) != n || !s.CompleteFrom.IsZero() {
		t.Fatalf("accepts %d held %d recent %d complete from %v; want %d, %d, %d, zero", s.Accepts, s.Held, len(s.Recent), s.CompleteFrom, n, n, n)
	}
	for i, r := range s.Recent {
		if r.Cookie != served[i] || r.Time.Before(start) || r.Time.After(time.Now()) {
			t.Fatalf("held accept %d: cookie %d at %v; want cookie %d between %v and now", i, r.Cookie, r.Time, served[i], start)
		}
	}
	if !s.LastAccept.Equal(s.Recent[n-1].Time) {
		t.Fatalf("last accept %v, want the latest held %v", s.LastAccept, s.Recent[n-1].Time)
	}
}

// TestDetailOptionSendsEveryAccept: Options.Detail (trace with filters)
// makes every watched namespace send a record per accept.
func TestDetailOptionSendsEveryAccept(t *testing.T) {
	const n = 30
	l := newLab(t)
	k := openTestKernel(t, Options{Detail: true})
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	waitDone := acceptN(ln.(*net.TCPListener), n)
	dialN(t, l, n)
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventAccept, srv) >= n })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	if got := countType(evs, collector.EventAccept, srv); got != n {
		t.Fatalf("%d accept records, want %d", got, n)
	}
	if s := scopeAccepts(t, k, srv); s.Accepts != n || s.Held != 0 {
		t.Fatalf("accepts %d held %d; want %d and 0", s.Accepts, s.Held, n)
	}
	if got := <-waitDone; got != n {
		t.Fatalf("server accepted %d, want %d", got, n)
	}
}

// checkRecent: the held accepts since the completeness floor are exactly
// the latest ones the server accepted, in order.
func checkRecent(t *testing.T, s AcceptStats, served []uint64) {
	t.Helper()
	var got []uint64
	for _, r := range s.Recent {
		if !r.Time.Before(s.CompleteFrom) {
			got = append(got, r.Cookie)
		}
	}
	if len(got) == 0 || len(got) > len(served) || !slices.Equal(got, served[len(served)-len(got):]) {
		t.Fatalf("held history since %v: %d cookies, not the latest the server accepted (of %d)", s.CompleteFrom, len(got), len(served))
	}
	if !s.LastAccept.Equal(s.Recent[len(s.Recent)-1].Time) {
		t.Fatalf("last accept %v, want the latest held %v", s.LastAccept, s.Recent[len(s.Recent)-1].Time)
	}
}

func scopeAccepts(t *testing.T, k *Kernel, ino uint32) AcceptStats {
	t.Helper()
	s, err := k.ScopeAccepts(ino)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dialN opens and closes n connections one after the other, so the
// server's accept order is the kernel's.
func dialN(t *testing.T, l *lab, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c, err := l.dial(8080)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.SetLinger(0)
		c.Close()
	}
}

// acceptCookies accepts until the listener closes, sending each accepted
// socket's cookie (SO_COOKIE) in accept order.
func acceptCookies(ln net.Listener) <-chan uint64 {
	out := make(chan uint64, 8192)
	go func() {
		defer close(out)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			out <- sockCookie(c.(*net.TCPConn))
			c.Close()
		}
	}()
	return out
}

func sockCookie(c *net.TCPConn) uint64 {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var cookie uint64
	_ = raw.Control(func(fd uintptr) {
		v, err := unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		if err == nil {
			cookie = v
		}
	})
	return cookie
}

// waitCookies takes the next n accepted cookies (bounded by 30 s).
func waitCookies(t *testing.T, cookies <-chan uint64, n int) []uint64 {
	t.Helper()
	out := make([]uint64, 0, n)
	deadline := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case c := <-cookies:
			out = append(out, c)
		case <-deadline:
			t.Fatalf("server accepted %d, want %d", len(out), n)
		}
	}
	return out
}

func nthAcceptCookie(evs []collector.Event, n int) uint64 {
	for _, ev := range evs {
		if ev.Type == collector.EventAccept {
			if n == 0 {
				return ev.SockCookie
			}
			n--
		}
	}
	return 0
}

// TestDetailHandoverUnderChurn: detail turns on while four clients keep
// connecting. Every accept is either held (read right after SetDetail) or
// sent as a record, never both and never neither: the held count plus the
// records is exactly what the server accepted, and no held cookie comes
// again as a record.
func TestDetailHandoverUnderChurn(t *testing.T) {
	const clients, each, flipAt = 4, 400, 600
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	cookies := acceptCookies(ln)
	errs := make(chan error, clients)
	for range clients {
		go func() {
			for i := 0; i < each; i++ {
				c, err := l.dial(8080)
				if err != nil {
					errs <- err
					return
				}
				c.SetLinger(0)
				c.Close()
			}
			errs <- nil
		}()
	}
	served := waitCookies(t, cookies, flipAt)
	must(t, k.SetDetail(srv, true))
	s := scopeAccepts(t, k, srv)
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	served = append(served, waitCookies(t, cookies, clients*each-flipAt)...)
	want := clients*each - int(s.Held)
	evs := collect(k, 30*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventAccept, srv) >= want })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	recorded := map[uint64]bool{}
	for _, ev := range evs {
		if ev.Type == collector.EventAccept && ev.NetnsIno == srv {
			recorded[ev.SockCookie] = true
		}
	}
	if int(s.Held)+len(recorded) != len(served) || countType(evs, collector.EventAccept, srv) != len(recorded) {
		t.Fatalf("held %d + %d records (%d distinct) != %d accepted", s.Held, countType(evs, collector.EventAccept, srv), len(recorded), len(served))
	}
	for _, r := range s.Recent {
		if recorded[r.Cookie] || !slices.Contains(served, r.Cookie) {
			t.Fatalf("held accept %d also a record (%v) or never accepted", r.Cookie, recorded[r.Cookie])
		}
	}
	t.Logf("detail on after %d accepts: %d held, %d records", flipAt, s.Held, len(recorded))
	ln.Close()
}
