package kernel

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ringPositions reads a ring buffer's consumer and producer positions: the
// byte offsets, growing without bound, of the next record to read and of
// the end of the last one reserved. The kernel exposes them on the first two
// pages of the map, which we map read-only.
//
// The reader needs them because ringbuf.Reader hides discarded records:
// it skips them, so neither the records it returns nor AvailableBytes (which
// counts discarded ones) tell where a given stretch of the ring ends. The
// positions do, exactly: records are contiguous, and the reader goroutine is
// the only one that moves the consumer position.
type ringPositions struct {
	mem        []byte
	cons, prod *uintptr
}

func mapRingPositions(m *ebpf.Map) (*ringPositions, error) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(m.FD(), 0, 2*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the ring buffer's positions: %w", err)
	}
	return &ringPositions{
		mem:  mem,
		cons: (*uintptr)(unsafe.Pointer(&mem[0])),
		prod: (*uintptr)(unsafe.Pointer(&mem[page])),
	}, nil
}

func (r *ringPositions) consumer() uintptr { return atomic.LoadUintptr(r.cons) }
func (r *ringPositions) producer() uintptr { return atomic.LoadUintptr(r.prod) }

func (r *ringPositions) close() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.cons, r.prod = nil, nil, nil
	return err
}

// backlog is the stretch of the ring buffer that was written before the
// reader opened: from the consumer position then to the producer position
// then (records still being written at that moment included).
type backlog struct {
	ring *ringPositions
	end  uintptr
}

// bytes is what the backlog still holds, discarded records included.
func (b backlog) bytes() int {
	if b.ring == nil {
		return 0
	}
	return int(b.end - b.ring.consumer())
}

// holdsLastRead reports whether the record the reader returned last belonged
// to the backlog: it did when it ended at or before the backlog's end.
func (b backlog) holdsLastRead() bool {
	return int(b.end-b.ring.consumer()) >= 0
}
