package kernel

import (
	"net"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestTenThousandAccepts: 10,000 connections accepted by a server in a
// watched namespace with detail give exactly 10,000 accept events, none
// lost.
func TestTenThousandAccepts(t *testing.T) {
	const n = 10000
	l := newLab(t)
	k := openTestKernel(t, Options{Detail: true})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptN(ln.(*net.TCPListener), n)
	counted := make(chan int)
	go func() { counted <- countAccepts(k, srv, n) }()
	for i := 0; i < n; i++ {
		c, err := l.dial(8080)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.SetLinger(0) // no TIME_WAIT pile-up in the client namespace
		c.Close()
	}
	// Wait for the server to take every queued connection before closing
	// the listener: on a loaded machine it lags behind the dials, and a
	// close would drop the rest of its accept queue.
	got := <-accepted
	ln.Close()
	if got != n {
		t.Fatalf("server accepted %d, want %d", got, n)
	}
	got = <-counted
	st, err := k.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got != n || st.Lost() != 0 || st.Events[collector.EventAccept] != n {
		t.Fatalf("%d accept events (stats %d), lost %+v; want %d and none lost", got, st.Events[collector.EventAccept], st, n)
	}
}

// acceptN accepts and closes want connections (or until the listener fails
// or 60 s pass) and sends how many it accepted.
func acceptN(ln *net.TCPListener, want int) <-chan int {
	done := make(chan int, 1)
	ln.SetDeadline(time.Now().Add(60 * time.Second))
	go func() {
		n := 0
		for ; n < want; n++ {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			c.Close()
		}
		done <- n
	}()
	return done
}

// countAccepts counts accept events in netns until want arrived and the
// stream is quiet, or 60 s pass.
func countAccepts(k *Kernel, netns uint32, want int) int {
	n := 0
	deadline := time.After(60 * time.Second)
	for {
		select {
		case ev := <-k.Events():
			if ev.Type == collector.EventAccept && ev.NetnsIno == netns {
				n++
			}
		case <-deadline:
			return n
		case <-time.After(time.Second):
			if n >= want {
				return n
			}
		}
	}
}
