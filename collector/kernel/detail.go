package kernel

import (
	"errors"
	"fmt"
	"slices"
	"structs"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// The accepts of a watched network namespace stay in the kernel
// (bpf/sock_state.bpf.c hold_accept) until a termination needs them one by
// one: SetDetail turns per-connection records on, and ScopeAccepts reads
// what the kernel held until then.

// AcceptStats is a network namespace's accepts as the kernel kept them.
type AcceptStats = collector.AcceptSummary

type acceptStats = sockStateAcceptStats

// acceptRing is ACCEPT_RING: the held accepts each CPU remembers.
const acceptRing = len(acceptStats{}.Ring)

// membarrierCmdGlobal is MEMBARRIER_CMD_GLOBAL (linux/membarrier.h): the
// kernel runs synchronize_rcu().
const membarrierCmdGlobal = 1

// SetDetail turns per-connection accept records of a watched network
// namespace on or off. Turning them on returns once no accept can still be
// held from before: the program reads the scope's flags once per accept and
// runs under rcu_read_lock, so after an RCU grace period every accept that
// read the old flags has finished updating the history, and every later one
// sends a record instead. ScopeAccepts read then holds exactly the accepts
// no record carries, no more (the history no longer moves), no fewer. When
// the grace period cannot be waited for (membarrier unavailable, as under
// nohz_full), the error wraps collector.ErrHandoverInexact and the flag is
// set all the same.
func (k *Kernel) SetDetail(ino uint32, on bool) error {
	flags, err := k.netnsFlags(ino)
	if err != nil {
		return fmt.Errorf("setting accept detail of netns %d: %w", ino, err)
	}
	next := flags &^ scopeDetail
	if on {
		next |= scopeDetail
	}
	if next == flags {
		return nil
	}
	if err := k.watch(scopeNetns, uint64(ino), next); err != nil {
		return err
	}
	if !on {
		return nil
	}
	return waitGracePeriod()
}

func waitGracePeriod() error {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0); errno != 0 {
		return fmt.Errorf("waiting for accepts in progress (membarrier): %w: %w", errno, collector.ErrHandoverInexact)
	}
	return nil
}

// ScopeAccepts reads what the kernel kept about a watched network
// namespace's accepts (see SetDetail for when the history is final).
func (k *Kernel) ScopeAccepts(ino uint32) (AcceptStats, error) {
	var perCPU []acceptStats
	if err := k.maps.byName["scope_accepts"].Lookup(ino, &perCPU); err != nil {
		return AcceptStats{}, fmt.Errorf("reading the accepts of netns %d: %w", ino, err)
	}
	s := summarize(perCPU, k.clock)
	s.NetnsIno = ino
	return s, nil
}

// summarize merges the CPUs' counters and histories. A CPU whose ring
// wrapped holds its accepts since its oldest entry only: the merged
// history is complete from the latest of those.
func summarize(perCPU []acceptStats, clk wallClock) AcceptStats {
	var s AcceptStats
	var last, floor uint64
	var recs []acceptRecord
	for i := range perCPU {
		c := &perCPU[i]
		s.Accepts += c.Accepts
		s.Probes += c.Probes
		s.Held += c.Held
		last = max(last, c.LastNs)
		held := c.Ring[:min(c.Held, uint64(acceptRing))]
		recs = append(recs, held...)
		if c.Held > uint64(acceptRing) {
			floor = max(floor, slices.MinFunc(held, byTime).TsNs)
		}
	}
	slices.SortFunc(recs, byTime)
	s.Recent = make([]collector.AcceptRecord, len(recs))
	for i, r := range recs {
		s.Recent[i] = collector.AcceptRecord{Time: clk.wall(r.TsNs), Cookie: r.Cookie}
	}
	if last != 0 {
		s.LastAccept = clk.wall(last)
	}
	if floor != 0 {
		s.CompleteFrom = clk.wall(floor)
	}
	return s
}

// acceptRecord is struct accept_rec, as bpf2go spells it inside acceptStats.
type acceptRecord = struct {
	_      structs.HostLayout
	TsNs   uint64
	Cookie uint64
}

func byTime(a, b acceptRecord) int { return compareU64(a.TsNs, b.TsNs) }

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// holdAccepts creates the netns's per-CPU accept entry; an existing one
// (pinned maps resumed) keeps its counts.
func (k *Kernel) holdAccepts(ino uint32) error {
	zero := make([]acceptStats, ebpf.MustPossibleCPU())
	err := k.maps.byName["scope_accepts"].Update(ino, zero, ebpf.UpdateNoExist)
	if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
		return fmt.Errorf("creating the accept counters of netns %d: %w", ino, err)
	}
	return nil
}

func (k *Kernel) dropAccepts(ino uint32) error {
	err := k.maps.byName["scope_accepts"].Delete(ino)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting the accept counters of netns %d: %w", ino, err)
	}
	return nil
}

// netnsFlags reads a watched netns's flags.
func (k *Kernel) netnsFlags(ino uint32) (uint8, error) {
	var flags uint8
	key := scopeKey{Id: uint64(ino), Kind: scopeNetns}
	if err := k.maps.scopes.Lookup(&key, &flags); err != nil {
		return 0, err
	}
	return flags, nil
}

// SetProbeComms tells the kernel the kubelet's command names: accepts of
// connections a task of one of these names opened are counted as probes
// and kept out of the held history (the correlator's --kubelet-comm).
func (k *Kernel) SetProbeComms(names []string) error {
	m := k.maps.byName["probe_comms"]
	var keys []sockStateCommKey
	var key sockStateCommKey
	var one uint8
	for it := m.Iterate(); it.Next(&key, &one); {
		keys = append(keys, key)
	}
	for i := range keys {
		if err := m.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing probe commands: %w", err)
		}
	}
	for _, n := range names {
		var c sockStateCommKey
		for i := 0; i < len(c.C)-1 && i < len(n); i++ {
			c.C[i] = int8(n[i])
		}
		if err := m.Update(&c, uint8(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("listing probe command %q: %w", n, err)
		}
	}
	return nil
}
