package kernel

import (
	"net"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestWatchAllLoopback: in watch-everything mode (trace without filters) a
// loopback listener of the root namespace shows its whole life: opened,
// one accept, closed, each exactly once and with its address.
func TestWatchAllLoopback(t *testing.T) {
	k := openTestKernel(t, Options{WatchAll: true})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	ln.Close()
	mine := func(ev collector.Event) bool { return ev.Local.String() == addr }
	var got []collector.EventType
	collect(k, 10*time.Second, func(evs []collector.Event) bool {
		if ev := evs[len(evs)-1]; mine(ev) {
			got = append(got, ev.Type)
		}
		return len(got) > 0 && got[len(got)-1] == collector.EventListenClose
	})
	want := []collector.EventType{collector.EventListenOpen, collector.EventAccept, collector.EventListenClose}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events on %s: %v, want %v", addr, got, want)
	}
}
