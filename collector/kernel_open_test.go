package collector

import (
	"net"
	"testing"
	"time"
)

// TestOpenKernelWatchAll attaches every probe and sees a loopback accept.
func TestOpenKernelWatchAll(t *testing.T) {
	k := openTestKernel(t, KernelOptions{WatchAll: true})
	for _, p := range k.Probes() {
		t.Logf("probe %s %s %s %s", p.Name, p.Hook, p.State, p.Detail)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	c.Close()
	s.Close()
	ln.Close()
	evs := collect(k, 5*time.Second, func(evs []Event) bool {
		for _, ev := range evs {
			if ev.Type == EventListenClose && ev.Local.Port() == port {
				return true
			}
		}
		return false
	})
	for _, ev := range evs {
		if ev.Local.Port() == port {
			t.Logf("%s %v %v->%v cookie=%d", ev.Type, ev.Time, ev.Remote, ev.Local, ev.SockCookie)
		}
	}
}
