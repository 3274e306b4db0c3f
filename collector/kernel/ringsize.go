package kernel

import (
	"fmt"
	"math/bits"
	"os"
)

// DefaultRingBufferSize is the ring buffer's size when Options leaves it
// unset: 4 MiB, about 29,000 events, what the reader's ceiling
// benchmark and the churn tests were measured with. Since accepts of pods
// that are not terminating stay in the kernel, a smaller one may do; it is
// a flag (--ring-buffer-size) until a churn measurement says which.
const DefaultRingBufferSize = 4 << 20

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
