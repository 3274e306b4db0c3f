package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// rcvFunctions are the functions whose discard path frees a SYN that found
// no socket, on kernels without drop reasons (bpf/refused.bpf.c's
// kfree_skb_rcv_syn); the compiler may split a .cold part off each.
var rcvFunctions = []string{"tcp_v4_rcv", "tcp_v4_rcv.cold", "tcp_v6_rcv", "tcp_v6_rcv.cold"}

// setCompat sets the constants behind bpf/drainwatch.h's compat helpers in
// every object that has them, and the code ranges the refused source
// without drop reasons needs when it is the one loaded.
func setCompat(spec *ebpf.CollectionSpec) error {
	if v := spec.Variables["cookie_helper"]; v != nil {
		if err := v.Set(kernelHasFunc("bpf_get_socket_ptr_cookie")); err != nil {
			return fmt.Errorf("setting cookie_helper: %w", err)
		}
	}
	if err := setIdleTimes(spec); err != nil {
		return err
	}
	if _, ok := spec.Programs["kfree_skb_rcv_syn"]; !ok {
		return nil
	}
	ranges, err := kallsymsRanges("/proc/kallsyms", rcvFunctions)
	if err != nil {
		return err
	}
	if err := spec.Variables["rcv_ranges"].Set(ranges); err != nil {
		return fmt.Errorf("setting rcv_ranges: %w", err)
	}
	return nil
}

// IdleCloseMin is the shortest idle time of a connection the server closes
// that bpf/sock_state.bpf.c reports (EventIdleClose): shorter is a server
// closing after its answer, not an idle timeout.
const IdleCloseMin = 100 * time.Millisecond

// setIdleTimes sets sock_state's tick and idle threshold: the kernel
// counts a connection's last data in jiffies, whose length (1/HZ) is
// CLOCK_MONOTONIC_COARSE's resolution.
func setIdleTimes(spec *ebpf.CollectionSpec) error {
	v := spec.Variables["tick_ns"]
	if v == nil {
		return nil
	}
	tick, err := kernelTick()
	if err != nil {
		return err
	}
	if err := v.Set(uint64(tick)); err != nil {
		return fmt.Errorf("setting tick_ns: %w", err)
	}
	jiffies := uint32((IdleCloseMin + tick - 1) / tick)
	if err := spec.Variables["idle_close_jiffies"].Set(jiffies); err != nil {
		return fmt.Errorf("setting idle_close_jiffies: %w", err)
	}
	return nil
}

// kernelTick is the length of a jiffy: CLOCK_MONOTONIC_COARSE's
// resolution (TICK_NSEC).
func kernelTick() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return 0, fmt.Errorf("reading the kernel's tick (clock_getres CLOCK_MONOTONIC_COARSE): %w", err)
	}
	tick := time.Duration(ts.Nano())
	if tick <= 0 || tick > 100*time.Millisecond {
		return 0, fmt.Errorf("the kernel's tick of %v (clock_getres CLOCK_MONOTONIC_COARSE) is not 1/HZ of a kernel with 10 <= HZ", tick)
	}
	return tick, nil
}

// kernelHasFunc reports whether kernel BTF describes the function: how a
// helper's availability to tracing programs shows (e.g.
// bpf_get_socket_ptr_cookie, Linux >= 5.12).
func kernelHasFunc(name string) bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var fn *btf.Func
	return spec.TypeByName(name, &fn) == nil
}

// kallsymsRanges finds each named text symbol's [start, end) in a kallsyms
// file, end being the next symbol's address; missing ones stay zero. It
// fails when none is found or addresses are hidden (kptr_restrict).
func kallsymsRanges(path string, names []string) ([4][2]uint64, error) {
	var out [4][2]uint64
	data, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("reading %s for the refused source without drop reasons: %w", path, err)
	}
	want := map[string]int{}
	for i, n := range names {
		want[n] = i
	}
	var addrs []uint64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		addrs = append(addrs, a)
		if i, ok := want[f[2]]; ok && i < len(out) && (f[1] == "t" || f[1] == "T") {
			out[i][0] = a
		}
	}
	found := false
	for i := range out {
		if out[i][0] == 0 {
			continue
		}
		found = true
		out[i][1] = nextAbove(addrs, out[i][0])
	}
	if !found {
		return out, errors.New("tcp_v4_rcv is not in /proc/kallsyms, or its addresses are hidden (kptr_restrict)")
	}
	return out, nil
}

// nextAbove is the smallest address above a: the end of a's symbol.
func nextAbove(addrs []uint64, a uint64) uint64 {
	end := ^uint64(0)
	for _, x := range addrs {
		if x > a && x < end {
			end = x
		}
	}
	return end
}
