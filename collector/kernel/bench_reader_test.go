package kernel

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// BenchmarkReaderSteadyState drives real events through the whole path:
// BPF (refused, one per iteration) -> ring buffer -> reader -> decode ->
// Events channel -> consumer. allocs/op covers the reader and consumer
// goroutines too and must be 0: the producer uses raw syscalls with a
// preallocated address, so any allocation would be the collector's.
//
//	go test -run '^$' -bench ReaderSteadyState -benchmem ./collector/kernel/
func BenchmarkReaderSteadyState(b *testing.B) {
	k := openTestKernel(b, Options{Logger: zerolog.Nop()})
	ns := newNetns(b, "dwk-reader")
	if err := k.WatchNetns(ns.Inode()); err != nil {
		b.Fatal(err)
	}
	received := make(chan int)
	go func() {
		n := 0
		for ev := range k.Events() {
			if ev.Type == collector.EventRefused {
				n++
			}
		}
		received <- n
	}()
	closed := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: closedPort}
	err := ns.Do(func() error {
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := refuseOnce(closed); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	statsAfter(k, collector.EventRefused, uint64(b.N))
	k.Close()
	if n := <-received; n != b.N {
		b.Fatalf("received %d refused events for %d attempts", n, b.N)
	}
}

func refuseOnce(addr *unix.SockaddrInet4) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Connect(fd, addr)
	unix.Close(fd)
	if !errors.Is(err, unix.ECONNREFUSED) {
		return err
	}
	return nil
}

// readerStep bounds each offered rate of BenchmarkReaderCeiling in time.
const readerStep = 2 * time.Second

// BenchmarkReaderCeiling offers refused connections (one kernel event
// each) at stepped rates, from one producer per CPU, for readerStep each,
// through the whole path as the daemon runs it, and reports per step the
// rate offered, the rate delivered and every loss: ring-buffer reserve
// failures in BPF and events dropped because the channel was full. The
// highest step with 0 lost is the reader's sustained rate on this machine;
// the unpaced step is where the producers, sharing the CPUs with the
// reader, saturate.
//
//	go test -run '^$' -bench ReaderCeiling -benchtime 1x -v ./collector/kernel/
//
// DRAINWATCH_BENCH_RING_BUFFER_SIZE=1048576 measures it with a 1 MiB ring.
func BenchmarkReaderCeiling(b *testing.B) {
	for _, rate := range []int{50_000, 100_000, 200_000, 400_000, 0} {
		name := "unpaced"
		if rate > 0 {
			name = fmt.Sprintf("offered=%d/s", rate)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				offerRefused(b, rate)
			}
		})
	}
}

// benchRingSize is the ring buffer size the ceiling is measured with:
// $DRAINWATCH_BENCH_RING_BUFFER_SIZE bytes, else the default.
func benchRingSize(b *testing.B) int {
	s := os.Getenv("DRAINWATCH_BENCH_RING_BUFFER_SIZE")
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("DRAINWATCH_BENCH_RING_BUFFER_SIZE=%q: %v", s, err)
	}
	return n
}

// offerRefused runs one step and reports it.
func offerRefused(b *testing.B, rate int) {
	k := openTestKernel(b, Options{Logger: zerolog.Nop(), RingBufferSize: benchRingSize(b)})
	ns := newNetns(b, "dwk-ceiling")
	if err := k.WatchNetns(ns.Inode()); err != nil {
		b.Fatal(err)
	}
	received := make(chan uint64)
	go func() {
		var n uint64
		for ev := range k.Events() {
			if ev.Type == collector.EventRefused {
				n++
			}
		}
		received <- n
	}()
	start := time.Now()
	sent, err := produceRefused(ns, rate, runtime.NumCPU(), start.Add(readerStep))
	elapsed := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	st := statsAfter(k, collector.EventRefused, sent)
	k.Close()
	got := <-received
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "offered/s")
	b.ReportMetric(float64(got)/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(float64(st.LostInKernel), "lost-in-kernel")
	b.ReportMetric(float64(st.Dropped), "dropped")
	b.Logf("offered %d refused connections in %v, delivered %d, lost in kernel %d, dropped %d, invalid %d",
		sent, elapsed.Round(time.Millisecond), got, st.LostInKernel, st.Dropped, st.Invalid)
	if got+st.LostInKernel+st.Dropped != sent {
		b.Errorf("delivered %d + lost %d + dropped %d != offered %d: an event is unaccounted for", got, st.LostInKernel, st.Dropped, sent)
	}
}

// produceRefused runs producers goroutines inside ns, each refusing
// connections at rate/producers per second (0: as fast as it can) until
// deadline, and returns how many were refused.
func produceRefused(ns *netlab.NS, rate, producers int, deadline time.Time) (uint64, error) {
	var sent atomic.Uint64
	errs := make(chan error, producers)
	closed := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: closedPort}
	for range producers {
		go func() {
			errs <- ns.Do(func() error {
				return refuseUntil(closed, float64(rate)/float64(producers), deadline, &sent)
			})
		}()
	}
	var err error
	for range producers {
		err = errors.Join(err, <-errs)
	}
	return sent.Load(), err
}

// refuseUntil paces itself every 64 attempts against perSecond (0: no
// pacing) and stops at deadline.
func refuseUntil(addr *unix.SockaddrInet4, perSecond float64, deadline time.Time, sent *atomic.Uint64) error {
	start := time.Now()
	for n := 0; ; n++ {
		if n%64 == 0 {
			now := time.Now()
			if now.After(deadline) {
				return nil
			}
			if perSecond > 0 {
				if ahead := time.Duration(float64(n)/perSecond*1e9) - now.Sub(start); ahead > 0 {
					time.Sleep(ahead)
				}
			}
		}
		if err := refuseOnce(addr); err != nil {
			return err
		}
		sent.Add(1)
	}
}
