package kernel

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestResetsCountedAlike: every source of RSTs counts the same traffic the
// same: n connections the server aborts with SO_LINGER 0 (RSTs of sockets,
// sent by this process), then, the listener closed and those sockets gone,
// one late segment per connection from its client (a bare ACK or data),
// which the server's kernel answers with a RST no socket sends (cookie 0,
// reason NO_SOCKET). The source without drop reasons (Linux < 5.17) does
// not see the latter: exactly none.
func TestResetsCountedAlike(t *testing.T) {
	for _, src := range resetSources {
		t.Run(src.name, func(t *testing.T) {
			wantNoSocket := 0
			if src.noSocket {
				wantNoSocket = nLateSegments
			}
			testResetsCountedAlike(t, src.opts, wantNoSocket)
		})
	}
}

const nLateSegments = 6

func testResetsCountedAlike(t *testing.T, opts Options, wantNoSocket int) {
	const noSocket = 1 // SK_RST_REASON_NO_SOCKET
	l := newLab(t)
	k := openTestKernel(t, opts)
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	must(t, err)
	var clients []netip.AddrPort
	for range nLateSegments {
		c := mustDial(t, l)
		defer c.Close()
		s, err := ln.Accept()
		must(t, err)
		must(t, s.(*net.TCPConn).SetLinger(0), s.Close())
		clients = append(clients, c.LocalAddr().(*net.TCPAddr).AddrPort())
	}
	must(t, ln.Close())
	server := netip.MustParseAddrPort(serverIP + ":8080")
	for i, c := range clients {
		flags, data := byte(tcpACK), []byte(nil)
		if i%2 == 1 {
			flags, data = tcpACK|tcpPSH, []byte("late request\n")
		}
		must(t, l.client.Do(func() error { return sendSegment(c, server, flags, data) }))
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool {
		return countType(evs, collector.EventReset, srv) >= nLateSegments+wantNoSocket
	})
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	sockets, noSockets := 0, 0
	for _, ev := range evs {
		switch {
		case ev.Type == collector.EventRefused || (ev.Type == collector.EventReset && ev.NetnsIno != srv):
			t.Errorf("unexpected %+v", ev)
			continue
		case ev.Type != collector.EventReset:
			continue // the listener's open and close
		}
		if ev.SockCookie != 0 {
			sockets++
			assertSender(t, ev, uint32(os.Getpid()), selfComm(t))
			continue
		}
		noSockets++
		if ev.Reason != noSocket || ev.Local != server || !containsAddr(clients, ev.Remote) || ev.PID != 0 {
			t.Errorf("reset without a socket %+v: want reason %d, local %s, a client's address, no process", ev, noSocket, server)
		}
	}
	if sockets != nLateSegments || noSockets != wantNoSocket {
		t.Fatalf("%d resets of sockets, %d without a socket; want %d and %d", sockets, noSockets, nLateSegments, wantNoSocket)
	}
}

func containsAddr(addrs []netip.AddrPort, a netip.AddrPort) bool {
	for _, b := range addrs {
		if a == b {
			return true
		}
	}
	return false
}

const (
	tcpSYN = 0x02
	tcpPSH = 0x08
	tcpACK = 0x10
)

// sendSegment sends one TCP segment from src to dst through a raw socket of
// the calling namespace (the kernel writes the IP header): what a peer
// sends to a connection that no longer exists.
func sendSegment(src, dst netip.AddrPort, flags byte, data []byte) error {
	return sendSegmentSeq(src, dst, flags, 1000, data) // no socket checks seq or ack
}

// sendSegmentSeq is sendSegment with the sequence number seq.
func sendSegmentSeq(src, dst netip.AddrPort, flags byte, seq uint32, data []byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.Addr().As4()}); err != nil {
		return fmt.Errorf("binding the raw socket to %s: %w", src.Addr(), err)
	}
	seg := make([]byte, 20+len(data))
	binary.BigEndian.PutUint16(seg[0:], src.Port())
	binary.BigEndian.PutUint16(seg[2:], dst.Port())
	binary.BigEndian.PutUint32(seg[4:], seq)
	binary.BigEndian.PutUint32(seg[8:], 1000)
	seg[12] = 5 << 4 // header length: 5 words
	seg[13] = flags
	binary.BigEndian.PutUint16(seg[14:], 65535)
	copy(seg[20:], data)
	binary.BigEndian.PutUint16(seg[16:], tcpChecksum(src.Addr(), dst.Addr(), seg))
	if err := unix.Sendto(fd, seg, 0, &unix.SockaddrInet4{Addr: dst.Addr().As4()}); err != nil {
		return fmt.Errorf("sending a segment to %s: %w", dst, err)
	}
	return nil
}

// tcpChecksum is the TCP checksum over the IPv4 pseudo-header and seg
// (whose checksum field is zero): a segment failing it gets no RST.
func tcpChecksum(src, dst netip.Addr, seg []byte) uint16 {
	s, d := src.As4(), dst.As4()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, unix.IPPROTO_TCP, byte(len(seg)>>8), byte(len(seg)))
	var sum uint32
	for _, b := range [][]byte{pseudo, seg} {
		for i := 0; i < len(b); i += 2 {
			w := uint32(b[i]) << 8
			if i+1 < len(b) {
				w |= uint32(b[i+1])
			}
			sum += w
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
