package kernel

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// closedPort has no listener in any lab namespace.
const closedPort = 9

// TestRefused: N connection attempts to a closed port of a watched
// namespace give exactly N refused events; the same traffic to a namespace
// nobody watches gives none. Both refused sources are checked.
func TestRefused(t *testing.T) {
	for name, opts := range map[string]Options{
		"tcp_send_reset":    {},
		"kfree_skb":         {RefusedFallback: true},
		"kfree_skb_rcv_syn": {RefusedByLocation: true}, // the source without drop reasons (< 5.17)
	} {
		t.Run(name, func(t *testing.T) { testRefused(t, opts) })
	}
}

func testRefused(t *testing.T, opts Options) {
	const n = 50
	watched, unwatched := newLab(t), newLab(t)
	k := openTestKernel(t, opts)
	if err := k.WatchNetns(watched.server.Inode()); err != nil {
		t.Fatal(err)
	}
	if got := refuse(t, watched, n); got != n {
		t.Fatalf("client saw %d refusals, want %d", got, n)
	}
	if got := refuse(t, unwatched, n); got != n {
		t.Fatalf("client saw %d refusals in the unwatched lab, want %d", got, n)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= n })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	if got := countType(evs, collector.EventRefused, watched.server.Inode()); got != n || len(evs) != n {
		t.Fatalf("%d refused in the watched netns, %d events in all; want %d and %d", got, len(evs), n, n)
	}
	for _, ev := range evs {
		if ev.Local.String() != serverIP+":9" || ev.Remote.Addr().String() != clientIP || ev.Reason != 1 {
			t.Fatalf("refused event %+v: want local %s:9, remote %s, reason 1 (NO_SOCKET)", ev, serverIP, clientIP)
		}
	}
}

// TestRefusedSeq: a refused event carries its SYN's sequence number, by
// which correlate counts a retransmitted SYN once: SYNs sent raw from one
// client port with sequence numbers 7, 7 (a retransmission) and
// 0xfedcba98 give three refused events with exactly those, from every
// refused source.
func TestRefusedSeq(t *testing.T) {
	for name, opts := range map[string]Options{
		"tcp_send_reset":    {},
		"kfree_skb":         {RefusedFallback: true},
		"kfree_skb_rcv_syn": {RefusedByLocation: true},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLab(t)
			k := openTestKernel(t, opts)
			must(t, k.WatchNetns(l.server.Inode()))
			src, dst := netip.MustParseAddrPort(clientIP+":45000"), netip.MustParseAddrPort(serverIP+":9")
			want := []uint32{7, 7, 0xfedcba98}
			for _, seq := range want {
				must(t, l.client.Do(func() error { return sendSegmentSeq(src, dst, tcpSYN, seq, nil) }))
			}
			evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= len(want) })
			evs = append(evs, drain(k, 300*time.Millisecond)...)
			var got []uint32
			for _, ev := range evs {
				if ev.Type != collector.EventRefused || ev.Remote != src || ev.Local != dst {
					t.Fatalf("event %+v: want refused from %s to %s", ev, src, dst)
				}
				got = append(got, ev.Seq)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("refused events' sequence numbers %#x, want %#x", got, want)
			}
		})
	}
}

// refuse makes n connection attempts to the closed port and returns how
// many the client saw refused.
func refuse(t *testing.T, l *lab, n int) int {
	refused := 0
	for i := 0; i < n; i++ {
		c, err := l.dial(closedPort)
		if err == nil {
			c.Close()
			t.Fatal("connected to the closed port")
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			refused++
		}
	}
	return refused
}

// TestRefusedIPv6: the same over IPv6 (headers parsed from the skb).
func TestRefusedIPv6(t *testing.T) {
	const n = 10
	l := newLab(t)
	if err := l.client.IP("addr add fd00:251::1/64 dev veth0 nodad"); err != nil {
		t.Fatal(err)
	}
	if err := l.server.IP("addr add fd00:251::2/64 dev veth0 nodad"); err != nil {
		t.Fatal(err)
	}
	k := openTestKernel(t, Options{})
	if err := k.WatchNetns(l.server.Inode()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := l.client.Dial(ctx, "tcp6", "[fd00:251::2]:9")
		cancel()
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("attempt %d: %v, want ECONNREFUSED", i, err)
		}
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= n })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	if got := countType(evs, collector.EventRefused, l.server.Inode()); got != n || len(evs) != n {
		t.Fatalf("%d refused, %d events; want %d", got, len(evs), n)
	}
	for _, ev := range evs {
		if ev.Local.String() != "[fd00:251::2]:9" || ev.Remote.Addr().String() != "fd00:251::1" {
			t.Fatalf("refused event %+v", ev)
		}
	}
}
