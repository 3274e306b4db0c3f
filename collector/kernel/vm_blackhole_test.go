//go:build vmguest

package kernel

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// nBlackholed SYNs to blackholeDst, a pod address whose network is gone,
// are dropped by the guest's kernel: sent on loopback as frames for
// another host's MAC, which IP drops on receive as OTHERHOST (a bridge's
// flooded copy on a node). The guest has no bridge or second interface;
// this is the same drop the host's TestBlackholed makes on a node bridge,
// and proves the program loads and reports on each kernel.
const nBlackholed = 3

var blackholeDst = netip.MustParseAddr("10.99.0.2")

// markBlackholeDst lists blackholeDst as a terminating pod's address.
func markBlackholeDst(t *testing.T, k *Kernel) {
	if err := k.WatchAddr(blackholeDst); err != nil {
		t.Fatal(err)
	}
	if err := k.BlackholeAddr(blackholeDst); err != nil {
		t.Fatal(err)
	}
}

// sendBlackholed sends the SYNs, from client ports 41000 on.
func sendBlackholed(t *testing.T) {
	// Protocol 0: a socket that only sends. One bound to ETH_P_ALL would
	// receive a copy of each frame, and its queue's purge at close is a
	// second drop (QUEUE_PURGE) of the same SYN.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	defer unix.Close(fd)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	to := &unix.SockaddrLinklayer{Ifindex: lo.Index, Protocol: htons(unix.ETH_P_IP)}
	for i := range nBlackholed {
		if err := unix.Sendto(fd, synFrame(uint16(41000+i), uint32(7000+i)), 0, to); err != nil {
			t.Fatalf("sending a SYN frame: %v", err)
		}
	}
}

// synFrame is an Ethernet frame for 02:00:00:00:00:01 (not loopback's
// all-zero address: the receive path marks it for another host) carrying
// a TCP SYN from 127.0.0.1:sport to blackholeDst:80.
func synFrame(sport uint16, seq uint32) []byte {
	f := make([]byte, 14+20+20)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(ip[2:], 40)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	copy(ip[12:16], []byte{127, 0, 0, 1})
	dst := blackholeDst.As4()
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	tcp := f[34:]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12], tcp[13] = 0x50, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	return f
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
