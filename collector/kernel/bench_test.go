package kernel

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// BenchmarkLoopbackChurn measures connect/accept/close on loopback inside a
// fresh network namespace: without probes, with every probe attached and
// nothing watched, and with that namespace watched (accept events flow, the
// in-flight map is filled and emptied). Compare ns/op across the three:
// the throughput ratio is ns/op(no_probes) / ns/op(other). On a busy
// machine prefer BenchmarkLoopbackChurnRatio, which interleaves the modes.
//
//	go test -run '^$' -bench LoopbackChurn -benchtime 20000x -count 5 ./collector/kernel/
func BenchmarkLoopbackChurn(b *testing.B) {
	b.Run("no_probes", func(b *testing.B) { churn(b, newChurnNetns(b)) })
	b.Run("probes_unwatched", func(b *testing.B) {
		openBenchKernel(b)
		churn(b, newChurnNetns(b))
	})
	b.Run("probes_watched", func(b *testing.B) {
		k := openBenchKernel(b)
		ns := newChurnNetns(b)
		if err := k.WatchNetns(ns.Inode()); err != nil {
			b.Fatal(err)
		}
		churn(b, ns)
		// Not terminating: every accept stays in the kernel.
		s, err := k.ScopeAccepts(ns.Inode())
		if st := statsAfter(k, collector.EventAccept, 0); err != nil || s.Accepts != uint64(b.N) || st.Events[collector.EventAccept] != 0 {
			b.Fatalf("watched: %d accepts counted (%v) and %d records for %d connections; want %[4]d and 0", s.Accepts, err, st.Events[collector.EventAccept], b.N)
		}
	})
	b.Run("probes_watched_detail", func(b *testing.B) {
		k := openBenchKernel(b)
		ns := newChurnNetns(b)
		if err := k.WatchNetns(ns.Inode()); err != nil {
			b.Fatal(err)
		}
		if err := k.SetDetail(ns.Inode(), true); err != nil {
			b.Fatal(err)
		}
		churn(b, ns)
		st := statsAfter(k, collector.EventAccept, uint64(b.N))
		if st.Lost() != 0 || st.Events[collector.EventAccept] != uint64(b.N) {
			b.Fatalf("watched: %d accepts for %d connections, lost %d", st.Events[collector.EventAccept], b.N, st.Lost())
		}
	})
}

// statsAfter waits (at most 5 s) for the reader to count want events of typ.
func statsAfter(k *Kernel, typ collector.EventType, want uint64) Stats {
	var st Stats
	for i := 0; i < 500; i++ {
		st, _ = k.Stats()
		if st.Events[typ] >= want {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return st
}

// openBenchKernel opens the probes and consumes their events, as the daemon
// would.
func openBenchKernel(b *testing.B) *Kernel {
	k := openTestKernel(b, Options{Logger: zerolog.Nop()})
	go func() {
		for range k.Events() {
		}
	}()
	return k
}

// newChurnNetns gives the benchmark its own loopback with the whole port
// range, so client TIME_WAIT sockets do not run out of ports.
func newChurnNetns(b *testing.B) *netlab.NS {
	ns := newNetns(b, "dwk-bench")
	if err := ns.Sysctl("net/ipv4/ip_local_port_range", "1024 65535"); err != nil {
		b.Fatal(err)
	}
	return ns
}

// churn runs b.N connect/accept/close cycles with raw syscalls on one
// thread inside ns, so only the kernel's work (and the probes') is measured.
func churn(b *testing.B, ns *netlab.NS) {
	err := ns.Do(func() error {
		lfd, addr, err := loopbackListener()
		if err != nil {
			return err
		}
		defer unix.Close(lfd)
		restore, err := pinThread()
		if err != nil {
			return err
		}
		defer restore()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := connectAcceptClose(lfd, addr); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func loopbackListener() (int, unix.Sockaddr, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return -1, nil, err
	}
	if err := unix.Listen(fd, 128); err != nil {
		return -1, nil, err
	}
	addr, err := unix.Getsockname(fd)
	return fd, addr, err
}

// connectAcceptClose: a blocking connect on loopback completes the
// handshake in the call, so accept never waits.
func connectAcceptClose(lfd int, addr unix.Sockaddr) error {
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Connect(cfd, addr); err != nil {
		unix.Close(cfd)
		return err
	}
	afd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		unix.Close(cfd)
		return err
	}
	unix.Close(cfd)
	return unix.Close(afd)
}
