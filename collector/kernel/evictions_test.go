package kernel

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLocalSynsEvictionsCounted: connects from the node to n distinct
// ports of a watched pod address (refused: nothing listens) insert n keys
// into local_syns, a 4096-entry LRU. Every insert is counted exactly, and
// what is not in the map any more is reported evicted.
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
	before, err := k.maps.lruInserts(0)
	if err != nil {
		t.Fatal(err)
	}
	err = l.client.Do(func() error {
		for port := 20000; port < 20000+n; port++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: ip.As4()})
			unix.Close(fd)
			if err != unix.ECONNREFUSED {
				t.Errorf("connect to :%d: %v, want ECONNREFUSED", port, err)
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
		t.Fatalf("local_syns inserts %d, want %d (one per distinct pod port)", ins-before, n)
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
