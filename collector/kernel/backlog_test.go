package kernel

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestResumedBacklogEndsExactly: the ring buffer a resumed Kernel opens
// holds discarded records besides events (the kfree_skb fallback reserves
// a record for every NO_SOCKET drop and discards those of RSTs),
// some of them after the last event. The reader waits for the consumer
// while it delivers that backlog and stops waiting exactly where the
// backlog ended: with the consumer stalled afterwards, live events fill the
// channel and the rest are dropped and counted, none blocks the reader.
func TestResumedBacklogEndsExactly(t *testing.T) {
	const refusedWhileClosed, discardedEach, live, buffer = 10, 25, 20, 4
	root := pinRoot(t)
	l := newLab(t)
	srv := l.server.Inode()
	k1 := openPinned(t, Options{PinPath: root, RefusedFallback: true})
	must(t, k1.WatchNetns(srv), k1.Close())
	sendDiscarded(t, l, discardedEach)
	if got := refuseFast(t, l, refusedWhileClosed); got != refusedWhileClosed {
		t.Fatalf("client saw %d refusals, want %d", got, refusedWhileClosed)
	}
	sendDiscarded(t, l, discardedEach)

	k2 := openPinned(t, Options{PinPath: root, RefusedFallback: true, Buffer: buffer})
	if !k2.Resumed() {
		t.Fatal("not resumed")
	}
	if want := (refusedWhileClosed + 2*discardedEach) * ringRecordSize(rawEventSize); k2.backlog.bytes() != want {
		t.Fatalf("backlog at open: %d bytes, want %d (%d events, %d discarded records)",
			k2.backlog.bytes(), want, refusedWhileClosed, 2*discardedEach)
	}
	evs := collect(k2, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= refusedWhileClosed })
	if got := countType(evs, collector.EventRefused, srv); got != refusedWhileClosed || len(evs) != refusedWhileClosed {
		t.Fatalf("backlog: %d refused of %d events, want %d", got, len(evs), refusedWhileClosed)
	}

	// The consumer stalls from here on.
	if got := refuseFast(t, l, live); got != live {
		t.Fatalf("client saw %d refusals, want %d", got, live)
	}
	var st Stats
	for range 500 {
		st = mustStats(t, k2)
		if st.Events[collector.EventRefused] >= refusedWhileClosed+live && len(k2.Events()) == buffer {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Events[collector.EventRefused] != refusedWhileClosed+live || st.Dropped != live-buffer || len(k2.Events()) != buffer ||
		st.LostInKernel != 0 || st.Invalid != 0 {
		t.Fatalf("stalled consumer: stats %+v, %d queued; want %d decoded, %d dropped, %d queued, 0 lost",
			st, len(k2.Events()), refusedWhileClosed+live, live-buffer, buffer)
	}
}

// ringRecordSize is the room a sample takes in the ring buffer: an 8-byte
// header, the data padded to 8 bytes.
func ringRecordSize(n int) int { return 8 + (n+7)&^7 }

func mustStats(t *testing.T, k *Kernel) Stats {
	t.Helper()
	st, err := k.Stats()
	must(t, err)
	return st
}

// ackPort is the source port of the bare ACKs: no socket uses it.
const ackPort = 40000

// sendDiscarded sends n TCP segments with only RST set from the client to
// the server's closed port, through a raw socket: each is dropped with
// reason NO_SOCKET and answered with nothing, so the fallback discards its
// record. Then a ping, from the same CPU (the veth queues to the sender's
// CPU, in order), whose answer says every RST was dropped.
func sendDiscarded(t *testing.T, l *lab, n int) {
	t.Helper()
	src, dst := netip.MustParseAddr(clientIP).As4(), netip.MustParseAddr(serverIP).As4()
	seg := bareSegment(src, dst, 0x04) // RST
	err := l.client.Do(func() error {
		var cpus, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &cpus); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &cpus)
		one.Set(0)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		for range n {
			if err := unix.Sendto(fd, seg, 0, &unix.SockaddrInet4{Addr: dst}); err != nil {
				return fmt.Errorf("sending a bare RST: %w", err)
			}
		}
		return ping(dst)
	})
	must(t, err)
}

// ping sends one ICMP echo request to dst and waits (5 s at most) for its
// reply.
func ping(dst [4]byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		return fmt.Errorf("raw ICMP socket: %w", err)
	}
	defer unix.Close(fd)
	const id = 0x6477
	req := []byte{8, 0, 0, 0, id >> 8, id & 0xff, 0, 1}
	binary.BigEndian.PutUint16(req[2:], ^uint16(onesSum(req)))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrInet4{Addr: dst}); err != nil {
		return fmt.Errorf("sending a ping: %w", err)
	}
	tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	for {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("awaiting the ping's reply: %w", err)
		}
		ihl := int(buf[0]&0x0f) * 4
		if m >= ihl+8 && buf[ihl] == 0 && binary.BigEndian.Uint16(buf[ihl+4:]) == id {
			return nil
		}
	}
}

// onesSum is the folded ones' complement sum of b's 16-bit words.
func onesSum(bs ...[]byte) uint32 {
	var sum uint32
	for _, b := range bs {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return sum
}

// bareSegment is a 20-byte TCP header with flags only, with its checksum.
func bareSegment(src, dst [4]byte, flags byte) []byte {
	seg := make([]byte, 20)
	binary.BigEndian.PutUint16(seg[0:], ackPort)
	binary.BigEndian.PutUint16(seg[2:], closedPort)
	binary.BigEndian.PutUint32(seg[4:], 1)
	binary.BigEndian.PutUint32(seg[8:], 1)
	seg[12] = 5 << 4
	seg[13] = flags
	binary.BigEndian.PutUint16(seg[14:], 65535)
	pseudo := append(append(append([]byte{}, src[:]...), dst[:]...), 0, unix.IPPROTO_TCP, 0, byte(len(seg)))
	binary.BigEndian.PutUint16(seg[16:], ^uint16(onesSum(pseudo, seg)))
	return seg
}
