package kernel

import (
	"errors"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// pinRoot is a fresh pin directory on bpffs, removed (pins and all) at the
// end of the test.
func pinRoot(t *testing.T) string {
	t.Helper()
	privileged.RequireRoot(t)
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, ""); err != nil {
			t.Fatalf("bpffs is not mounted at /sys/fs/bpf and mounting it failed: %v", err)
		}
	}
	root := filepath.Join("/sys/fs/bpf", "drainwatch-test-"+rand.String(6))
	t.Cleanup(func() {
		if err := RemovePins(root); err != nil {
			t.Error(err)
		}
	})
	return root
}

// openPinned opens a kernel without the per-test Close of openTestKernel:
// these tests close it themselves, in the middle.
func openPinned(t *testing.T, opts Options) *Kernel {
	t.Helper()
	privileged.RequireFile(t, kernelBTFPath, "kernel BTF")
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()
	k, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	for _, p := range k.Probes() {
		if !p.Attached() {
			t.Fatalf("probe %s (%s) not attached: %s", p.Name, p.Hook, p.Detail)
		}
	}
	return k
}

// linkIDs are the kernel ids of a Kernel's links, to check they are gone.
func linkIDs(t *testing.T, k *Kernel) []link.ID {
	t.Helper()
	var ids []link.ID
	for _, l := range k.links {
		info, err := l.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	return ids
}

// waitDetached polls (bounded) until no link of ids exists: unpinned links
// are released by a kernel work item, shortly after the unlink.
func waitDetached(t *testing.T, ids []link.ID) {
	t.Helper()
	var alive []link.ID
	for range 100 {
		alive = alive[:0]
		for _, id := range ids {
			if l, err := link.NewFromID(id); err == nil {
				l.Close()
				alive = append(alive, id)
			}
		}
		if len(alive) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("links %v still attached", alive)
}

func pinEntries(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, path)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// TestPinResume: events of a watched namespace generated while no Kernel is
// open wait in the pinned ring buffer; the next Open resumes the same
// programs and delivers exactly those, none of the ones read before, with
// no loss; probes report the same states. Unpin then removes every pin.
func TestPinResume(t *testing.T) {
	const before, whileClosed, after = 20, 500, 30
	root := pinRoot(t)
	l := newLab(t)
	k1 := openPinned(t, Options{PinPath: root})
	if k1.Resumed() {
		t.Fatal("first open reports Resumed")
	}
	must(t, k1.WatchNetns(l.server.Inode()))
	if got := refuse(t, l, before); got != before {
		t.Fatalf("client saw %d refusals, want %d", got, before)
	}
	evs := collect(k1, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= before })
	probes := k1.Probes()
	must(t, k1.Close())
	if len(evs) != before {
		t.Fatalf("first run: %d events, want %d", len(evs), before)
	}

	if got := refuseFast(t, l, whileClosed); got != whileClosed {
		t.Fatalf("client saw %d refusals while closed, want %d", got, whileClosed)
	}
	k2 := openPinned(t, Options{PinPath: root})
	if !k2.Resumed() {
		t.Fatal("reopened with the same pins: Resumed() is false")
	}
	if !reflect.DeepEqual(k2.Probes(), probes) {
		t.Errorf("resumed probes %+v, want %+v", k2.Probes(), probes)
	}
	evs = collect(k2, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= whileClosed })
	evs = append(evs, drain(k2, 300*time.Millisecond)...)
	st, err := k2.Stats()
	must(t, err)
	if got := countType(evs, collector.EventRefused, l.server.Inode()); got != whileClosed || len(evs) != whileClosed || st.Lost() != 0 {
		t.Fatalf("after resuming: %d refused of %d events, lost %d; want %d, %d, 0", got, len(evs), st.Lost(), whileClosed, whileClosed)
	}
	// The resumed programs keep feeding the same reader.
	if got := refuse(t, l, after); got != after {
		t.Fatalf("client saw %d refusals, want %d", got, after)
	}
	evs = collect(k2, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= after })
	if got := countType(evs, collector.EventRefused, l.server.Inode()); got != after {
		t.Fatalf("after resuming, live: %d refused, want %d", got, after)
	}
	t.Logf("refused %d before Close, %d while closed, %d after resuming: delivered %d, %d, %d, lost 0",
		before, whileClosed, after, before, whileClosed, after)

	ids := linkIDs(t, k2)
	must(t, k2.Unpin(), k2.Close())
	waitDetached(t, ids)
	if left := pinEntries(t, root); len(left) != 0 {
		t.Fatalf("pins left after Unpin: %v", left)
	}
}

// TestPinOverflowWhileClosed: more events than the default ring buffer holds
// arrive while no Kernel is open. The resumed Kernel delivers what fit, and
// the rest shows in LostInKernel: delivered + lost = generated, nothing
// silently missing. (The backlog is larger than the Events channel: the
// reader waits for the consumer instead of dropping it.)
func TestPinOverflowWhileClosed(t *testing.T) {
	const n = 16000 // 2 MiB / 144-byte records = 14563
	root := pinRoot(t)
	l := newLab(t)
	k1 := openPinned(t, Options{PinPath: root})
	must(t, k1.WatchNetns(l.server.Inode()), k1.Close())
	if got := refuseFast(t, l, n); got != n {
		t.Fatalf("client saw %d refusals, want %d", got, n)
	}
	k2 := openPinned(t, Options{PinPath: root})
	if !k2.Resumed() {
		t.Fatal("not resumed")
	}
	evs := drain(k2, 500*time.Millisecond)
	st, err := k2.Stats()
	must(t, err)
	refused := countType(evs, collector.EventRefused, l.server.Inode())
	t.Logf("%d refused while closed: %d delivered, %d lost in the kernel, %d dropped", n, refused, st.LostInKernel, st.Dropped)
	if refused+int(st.LostInKernel) != n || len(evs) != refused || st.LostInKernel == 0 || st.Dropped != 0 {
		t.Fatalf("delivered %d (of %d events) + lost in kernel %d != %d generated (dropped %d)",
			refused, len(evs), st.LostInKernel, n, st.Dropped)
	}
	// Only refusals were made: every lost record was one.
	if want := map[collector.EventType]uint64{collector.EventRefused: st.LostInKernel}; !maps.Equal(st.LostInKernelByType, want) {
		t.Errorf("lost in the kernel by type %v, want %v", st.LostInKernelByType, want)
	}
}

// TestPinReplaced: pins of other programs (here: the kfree_skb fallback,
// a different hash) or of another ring buffer size are not reused; the new
// programs attach, then the old pins are removed and their links detach.
// NoResume does the same with pins of the same programs.
func TestPinReplaced(t *testing.T) {
	for name, opts := range map[string]Options{
		"other_programs":  {RefusedFallback: true},
		"other_ring_size": {RingBufferSize: 1 << 20},
		"no_resume":       {},
	} {
		t.Run(name, func(t *testing.T) {
			root := pinRoot(t)
			l := newLab(t)
			opts.PinPath = root
			k1 := openPinned(t, opts)
			must(t, k1.WatchNetns(l.server.Inode()))
			old, oldDir := linkIDs(t, k1), k1.pins.dir()
			must(t, k1.Close())
			if got := refuseFast(t, l, 10); got != 10 {
				t.Fatalf("client saw %d refusals, want 10", got)
			}
			k2 := openPinned(t, Options{PinPath: root, NoResume: name == "no_resume"})
			if k2.Resumed() {
				t.Fatal("resumed pins it must replace")
			}
			if got := k2.maps.events.MaxEntries(); got != DefaultRingBufferSize {
				t.Fatalf("ring buffer of %d bytes, want %d", got, DefaultRingBufferSize)
			}
			waitDetached(t, old)
			if name != "no_resume" {
				if _, err := os.Stat(oldDir); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("old pins %s still there (%v)", oldDir, err)
				}
			}
			entries, err := os.ReadDir(root)
			must(t, err)
			if len(entries) != 1 || entries[0].Name() != k2.pins.hash {
				t.Fatalf("pin root holds %v, want only %s", entries, k2.pins.hash)
			}
			// Fresh maps: nothing watched, nothing of the old ring buffer.
			if evs := drain(k2, 300*time.Millisecond); len(evs) != 0 {
				t.Fatalf("fresh programs delivered %d old events", len(evs))
			}
			must(t, k2.WatchNetns(l.server.Inode()))
			refuse(t, l, 5)
			evs := collect(k2, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= 5 })
			if got := countType(evs, collector.EventRefused, l.server.Inode()); got != 5 {
				t.Fatalf("fresh programs: %d refused, want 5", got)
			}
		})
	}
}

// TestPinLocked: a second Kernel on the same pin path is refused while the
// first is open (two readers of one ring buffer would split its events).
func TestPinLocked(t *testing.T) {
	root := pinRoot(t)
	openPinned(t, Options{PinPath: root})
	k, err := Open(Options{PinPath: root})
	if err == nil {
		k.Close()
		t.Fatal("a second Open on the same pin path succeeded")
	}
	t.Logf("second open: %v", err)
}

// TestNoPinPath: without PinPath nothing appears in bpffs, and Close
// detaches every program, as before pinning existed.
func TestNoPinPath(t *testing.T) {
	privileged.RequireRoot(t)
	k := openPinned(t, Options{})
	before := pinEntries(t, "/sys/fs/bpf")
	if k.Resumed() || k.pins != nil {
		t.Fatal("a Kernel without PinPath is pinned or resumed")
	}
	ids := linkIDs(t, k)
	must(t, k.Unpin(), k.Close())
	waitDetached(t, ids)
	after := pinEntries(t, "/sys/fs/bpf")
	for _, p := range after {
		if !slices.Contains(before, p) {
			t.Errorf("%s appeared in bpffs", p)
		}
	}
}

// refuseFast makes n connection attempts to the closed port from one
// thread inside the client namespace (no namespace switch per attempt) and
// returns how many were refused. Bounded by n and by 60 s.
func refuseFast(t *testing.T, l *lab, n int) int {
	t.Helper()
	refused := 0
	deadline := time.Now().Add(60 * time.Second)
	sa := &unix.SockaddrInet4{Port: closedPort, Addr: netip.MustParseAddr(serverIP).As4()}
	err := l.client.Do(func() error {
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			err = unix.Connect(fd, sa)
			unix.Close(fd)
			if errors.Is(err, syscall.ECONNREFUSED) {
				refused++
			}
		}
		return nil
	})
	must(t, err)
	return refused
}

func must(t testing.TB, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestPinResumeFallback: a probe running its fallback program is reported
// as a fallback again when resumed (its link's pin names the program), and
// the fallback keeps counting refusals made while closed.
func TestPinResumeFallback(t *testing.T) {
	root := pinRoot(t)
	l := newLab(t)
	k1 := openPinned(t, Options{PinPath: root, RefusedFallback: true})
	must(t, k1.WatchNetns(l.server.Inode()))
	probes := k1.Probes()
	must(t, k1.Close())
	if got := refuseFast(t, l, 20); got != 20 {
		t.Fatalf("client saw %d refusals, want 20", got)
	}
	k2 := openPinned(t, Options{PinPath: root, RefusedFallback: true})
	if !k2.Resumed() || !reflect.DeepEqual(k2.Probes(), probes) {
		t.Fatalf("resumed %v, probes %+v; want resumed, %+v", k2.Resumed(), k2.Probes(), probes)
	}
	i := slices.IndexFunc(probes, func(p ProbeStatus) bool { return p.Name == "refused" })
	if i < 0 || probes[i].State != ProbeFallback || probes[i].Hook != "tp_btf/kfree_skb" {
		t.Fatalf("refused probe %+v, want the kfree_skb fallback", probes)
	}
	evs := collect(k2, 10*time.Second, func(evs []collector.Event) bool { return len(evs) >= 20 })
	evs = append(evs, drain(k2, 300*time.Millisecond)...)
	if got := countType(evs, collector.EventRefused, l.server.Inode()); got != 20 || len(evs) != 20 {
		t.Fatalf("fallback resumed: %d refused of %d events, want 20", got, len(evs))
	}
}
