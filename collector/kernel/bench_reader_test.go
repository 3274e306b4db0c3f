package kernel

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
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
