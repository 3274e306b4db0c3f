package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
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
