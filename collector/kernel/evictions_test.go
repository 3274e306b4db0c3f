package kernel

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLocalSynsEvictionsCounted: connects from the node to a watched pod
// address from n distinct source addresses (refused: nothing listens)
// insert n keys into local_syns, a 4096-entry LRU keyed by source and pod
// address. Every insert is counted exactly, and what is not in the map any
// more is reported evicted.
func TestLocalSynsEvictionsCounted(t *testing.T) {
	const n = 5000
	l := newLab(t)
	k := openTestKernel(t, Options{})
	if err := k.WatchNetns(l.server.Inode()); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr(serverIP)
	if err := k.WatchAddr(ip); err != nil {
		t.Fatal(err)
	}
	src := func(i int) [4]byte { return [4]byte{10, 252, byte(i >> 8), byte(i)} }
	adds := make([]string, n)
	for i := range n {
		a := src(i)
		adds[i] = fmt.Sprintf("addr add %s/32 dev veth0", netip.AddrFrom4(a))
	}
	if err := l.client.IP(adds...); err != nil {
		t.Fatal(err)
	}
	if err := l.server.Route("10.252.0.0/16", clientIP); err != nil {
		t.Fatal(err)
	}
	before, err := k.maps.lruInserts(0)
	if err != nil {
		t.Fatal(err)
	}
	err = l.client.Do(func() error {
		for i := range n {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src(i)}); err != nil {
				unix.Close(fd)
				return err
			}
			err = unix.Connect(fd, &unix.SockaddrInet4{Port: 20000, Addr: ip.As4()})
			unix.Close(fd)
			if err != unix.ECONNREFUSED {
				t.Errorf("connect from %s: %v, want ECONNREFUSED", netip.AddrFrom4(src(i)), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := k.maps.lruInserts(0)
	if err != nil {
		t.Fatal(err)
	}
	if ins-before != n {
		t.Fatalf("local_syns inserts %d, want %d (one per distinct source address)", ins-before, n)
	}
	live, err := countEntries(k.maps.byName["local_syns"])
	if err != nil {
		t.Fatal(err)
	}
	ev, err := k.MapEvictions(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("local_syns: %d inserts, %d entries left, %d evicted", ins, live, ev["local_syns"])
	if ev["local_syns"] != ins-live || live > 4096 || ev["local_syns"] < n-4096 {
		t.Errorf("local_syns evicted %d with %d inserts and %d entries left, want %d (and at least %d)",
			ev["local_syns"], ins, live, ins-live, n-4096)
	}
	if ev["group_exits"] != 0 {
		t.Errorf("group_exits evicted %d, want 0", ev["group_exits"])
	}
	st, err := k.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Evicted["local_syns"] != ev["local_syns"] {
		t.Errorf("Stats: local_syns evicted %d, want %d", st.Evicted["local_syns"], ev["local_syns"])
	}
}
