package kernel

import "testing"

func TestRingBufferSize(t *testing.T) {
	for in, want := range map[int]int{0: DefaultRingBufferSize, 4096: 4096, 1 << 20: 1 << 20, 1 << 22: 1 << 22} {
		if got, err := RingBufferSize(in); err != nil || got != want {
			t.Errorf("RingBufferSize(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []int{-4096, 1024, 3 << 20, 1 << 31} {
		if _, err := RingBufferSize(bad); err == nil {
			t.Errorf("RingBufferSize(%d) accepted", bad)
		}
	}
}
