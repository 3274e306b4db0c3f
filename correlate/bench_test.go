package correlate

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// benchNode is a node with 110 pods (the kubelet's default maximum), each
// bound to its netns and cgroup; pod 0 is terminating (stop signal seen).
func benchNode(b testing.TB) *Correlator {
	c := New(Config{})
	for i := range 110 {
		uid := fmt.Sprintf("uid-%03d", i)
		ip := netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 1)})
		feed(c, born(uid, ip, netA+uint32(i), cgA+uint64(i), 30*time.Second, ms(-60000)))
		feed(c, []any{sock(collector.EventListenOpen, netA+uint32(i), ip, 1, ms(-59000))})
	}
	feed(c, []any{
		deleting("uid-000", netip.AddrFrom4([4]byte{10, 244, 1, 1}), 30*time.Second, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		notReady("uid-000", ms(1)),
	})
	return c
}

// BenchmarkKernel measures Kernel per event on the hot paths: accepts of
// pods that are not terminating (the bulk of traffic the BPF filter lets
// through), accepts and refusals of a terminating pod, attribution by IP
// when the netns is unknown, and events no pod claims.
func BenchmarkKernel(b *testing.B) {
	cases := []struct {
		name string
		ev   func(i int) collector.Event
	}{
		{"accept/serving", func(i int) collector.Event {
			return sock(collector.EventAccept, netA+1+uint32(i%109), ipA, uint64(i), t0)
		}},
		{"accept/terminating", func(i int) collector.Event {
			return sock(collector.EventAccept, netA, ipA, uint64(i%1024), t0)
		}},
		{"refused/terminating", func(i int) collector.Event {
			return sock(collector.EventRefused, netA, ipA, 0, t0)
		}},
		{"refused/by-ip", func(i int) collector.Event {
			return sock(collector.EventRefused, 0, netip.AddrFrom4([4]byte{10, 244, 1, 1}), 0, t0)
		}},
		{"unattributed", func(i int) collector.Event {
			return sock(collector.EventRefused, 1, netip.MustParseAddr("10.9.9.9"), 0, t0)
		}},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			c := benchNode(b)
			evs := make([]collector.Event, 4096)
			for i := range evs {
				evs[i] = bc.ev(i)
			}
			start := ms(10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				e := evs[i%len(evs)]
				e.Time = start.Add(time.Duration(i))
				c.Kernel(e)
			}
		})
	}
}

// BenchmarkSnapshot measures Snapshot on a node of 110 pods, one of them
// terminating with a full timeline; it runs every few seconds, off the
// per-event path.
func BenchmarkSnapshot(b *testing.B) {
	c := benchNode(b)
	for i := range 4096 {
		c.Kernel(sock(collector.EventAccept, netA+uint32(i%110), ipA, uint64(i), ms(10+i)))
	}
	s, err := c.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	size, _ := json.Marshal(s)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(size)), "json-bytes")
}

// TestKernelPathAllocs holds the per-event path of a serving pod's accept
// (every accept of every watched pod goes through it) at zero allocations
// in every go test, not only when someone reads the benchmark: an indirect
// call in dispatch once moved every event to the heap.
func TestKernelPathAllocs(t *testing.T) {
	c := benchNode(t)
	e := sock(collector.EventAccept, netA+1, ipA, 1, ms(10))
	if n := testing.AllocsPerRun(1000, func() { e.Time = e.Time.Add(time.Microsecond); c.Kernel(e) }); n != 0 {
		t.Errorf("%v allocations per accept of a serving pod, want 0", n)
	}
}
