package kernel

import (
	"fmt"
	"math/bits"
	"os"
)

// DefaultRingBufferSize is the ring buffer's size when Options leaves it
// unset: 2 MiB, about 14,500 events, 0.28 s of a 50 k/s burst. The
// reader maps it twice, so it is 4 MiB of the daemon's RSS (2 MiB of
// kernel memory). Since accepts of pods that are not terminating stay in
// the kernel, only terminating pods' connections, signals and exits cross
// it: the reader's ceiling benchmark (50 k/s to unpaced, 2 s steps, load
// average 10 on 2 cores) lost nothing in the kernel with 2 MiB in two runs
// (and with 1 MiB in one; an earlier run lost 963 events at 50 k/s with
// 1 MiB), while 4 MiB cost 4 MiB more RSS on every node. A node that
// bursts more raises --ring-buffer-size; what the ring cannot hold is
// counted (events_lost), never silent.
const DefaultRingBufferSize = 2 << 20

// maxRingBufferSize keeps the size a valid uint32 page-aligned power of
// two (the kernel's own limit is lower on most systems).
const maxRingBufferSize = 1 << 30

// RingBufferSize validates a ring buffer size in bytes (0: the default):
// the kernel takes only a power of two that is a multiple of the page size.
func RingBufferSize(n int) (int, error) {
	if n == 0 {
		return DefaultRingBufferSize, nil
	}
	page := os.Getpagesize()
	if n < page || n > maxRingBufferSize || bits.OnesCount(uint(n)) != 1 {
		return 0, fmt.Errorf("ring buffer size %d bytes: want a power of two from %d (one page) to %d", n, page, maxRingBufferSize)
	}
	return n, nil
}
