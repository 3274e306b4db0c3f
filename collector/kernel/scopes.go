package kernel

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/drainwatch/drainwatch/collector"
)

// Project names for the bpf2go-generated types (bpf/drainwatch.h): the
// sockState object is the one generated with -type event.
type (
	rawEvent = sockStateEvent
	scopeKey = sockStateScopeKey
)

// Scope kinds and flags, as in bpf/drainwatch.h.
const (
	scopeNetns  = 1
	scopeCgroup = 2

	scopeWatched uint8 = 1
	scopeDetail  uint8 = 2
)

// sharedMapNames are defined by every BPF object; the loader creates them
// once and hands the same maps to every object.
var sharedMapNames = []string{"scopes", "events", "lost", "conns", "conn_full", "local_dsts", "local_syns",
	"scope_accepts", "probe_comms", "group_exits", "lru_inserts"}

type sharedMaps struct {
	byName map[string]*ebpf.Map
	scopes *ebpf.Map
	events *ebpf.Map
	lost   *ebpf.Map
}

func newSharedMaps(ringSize uint32) (sharedMaps, error) {
	spec, err := sharedMapSpecs(ringSize)
	if err != nil {
		return sharedMaps{}, err
	}
	m := sharedMaps{byName: map[string]*ebpf.Map{}}
	for _, name := range sharedMapNames {
		mp, err := ebpf.NewMap(spec.Maps[name])
		if err != nil {
			m.close()
			return sharedMaps{}, fmt.Errorf("creating BPF map %s: %w", name, err)
		}
		m.byName[name] = mp
	}
	m.scopes, m.events, m.lost = m.byName["scopes"], m.byName["events"], m.byName["lost"]
	return m, nil
}

// loadPinnedMaps reopens the shared maps pinned in dir, each checked
// against the embedded object's definition with this run's ring buffer
// size: a ring buffer pinned with another size is refused (and replaced
// by fresh objects).
func loadPinnedMaps(dir string, ringSize uint32) (sharedMaps, error) {
	spec, err := sharedMapSpecs(ringSize)
	if err != nil {
		return sharedMaps{}, err
	}
	m := sharedMaps{byName: map[string]*ebpf.Map{}}
	for _, name := range sharedMapNames {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(dir, pinMapPrefix+name), nil)
		if err != nil {
			m.close()
			return sharedMaps{}, fmt.Errorf("loading pinned BPF map %s: %w", name, err)
		}
		m.byName[name] = mp
		if err := spec.Maps[name].Compatible(mp); err != nil {
			m.close()
			return sharedMaps{}, fmt.Errorf("pinned BPF map %s: %w", name, err)
		}
	}
	m.scopes, m.events, m.lost = m.byName["scopes"], m.byName["events"], m.byName["lost"]
	return m, nil
}

// sharedMapSpecs are the embedded object's map definitions, with the ring
// buffer sized ringSize bytes.
func sharedMapSpecs(ringSize uint32) (*ebpf.CollectionSpec, error) {
	spec, err := loadSockState()
	if err != nil {
		return nil, fmt.Errorf("parsing the embedded BPF object: %w", err)
	}
	spec.Maps["events"].MaxEntries = ringSize
	return spec, nil
}

func (m sharedMaps) close() error {
	var errs []error
	for _, mp := range m.byName {
		errs = append(errs, mp.Close())
	}
	return errors.Join(errs...)
}

// lostTypes is bpf/drainwatch.h's LOST_TYPES: the lost counter's slots,
// one per event type (0 for a type beyond them).
const lostTypes = 16

// lostInKernel sums the per-CPU ring-buffer reserve failures of every type.
func (m sharedMaps) lostInKernel() (uint64, error) {
	byType, err := m.lostInKernelByType()
	var sum uint64
	for _, n := range byType {
		sum += n
	}
	return sum, err
}

// lostInKernelByType is the ring-buffer reserve failures per event type,
// summed over CPUs; types that lost nothing are absent.
func (m sharedMaps) lostInKernelByType() (map[collector.EventType]uint64, error) {
	out := map[collector.EventType]uint64{}
	for slot := uint32(0); slot < lostTypes; slot++ {
		n, err := m.perCPUSumAt("lost", slot, "the lost-events counter")
		if err != nil {
			return out, err
		}
		if n > 0 {
			out[collector.EventType(slot)] += n
		}
	}
	return out, nil
}

// untrackedInKernel sums the accepted connections the kernel could not
// track because the connection map was full.
func (m sharedMaps) untrackedInKernel() (uint64, error) {
	return m.perCPUSum("conn_full", "the untracked-connections counter")
}

func (m sharedMaps) perCPUSum(name, what string) (uint64, error) {
	return m.perCPUSumAt(name, 0, what)
}

// perCPUSumAt sums a per-CPU array's entry over CPUs.
func (m sharedMaps) perCPUSumAt(name string, key uint32, what string) (uint64, error) {
	mp := m.byName[name]
	if mp == nil {
		return 0, fmt.Errorf("reading %s: map %s not loaded", what, name)
	}
	var perCPU []uint64
	if err := mp.Lookup(key, &perCPU); err != nil {
		return 0, fmt.Errorf("reading %s: %w", what, err)
	}
	var sum uint64
	for _, n := range perCPU {
		sum += n
	}
	return sum, nil
}

// WatchNetns reports socket, signal and exit events of the network
// namespace with this inode (see NetnsInode). Its accepts are counted in
// the kernel (ScopeAccepts), each reported as an event only with detail
// (SetDetail, Options.Detail). Watching it again keeps its detail and
// counts (a restart resuming pinned maps).
func (k *Kernel) WatchNetns(ino uint32) error {
	if err := k.holdAccepts(ino); err != nil {
		return err
	}
	flags, _ := k.netnsFlags(ino)
	flags |= scopeWatched
	if k.detailAll {
		flags |= scopeDetail
	}
	return k.watch(scopeNetns, uint64(ino), flags)
}

// UnwatchNetns stops reporting a network namespace. Unknown ones are ignored.
func (k *Kernel) UnwatchNetns(ino uint32) error {
	return errors.Join(k.unwatch(scopeNetns, uint64(ino)), k.dropAccepts(ino))
}

// WatchCgroup reports signal and exit events of tasks in the cgroup v2 with
// this id (see CgroupID). Socket events are attributed by network namespace
// only: they run in softirq, without a meaningful task.
func (k *Kernel) WatchCgroup(id uint64) error { return k.watch(scopeCgroup, id, scopeWatched) }

// UnwatchCgroup stops reporting a cgroup. Unknown ones are ignored.
func (k *Kernel) UnwatchCgroup(id uint64) error { return k.unwatch(scopeCgroup, id) }

// WatchAddr lists a pod address of this node, so that connections a task
// of the node opens to it (the kubelet's probes, a node-local proxy) carry
// that task as their source (Event.SenderPID, SenderComm, SenderCgroup).
func (k *Kernel) WatchAddr(a netip.Addr) error {
	key := addrKey(a)
	if err := k.maps.byName["local_dsts"].Update(&key, uint8(dstWatched), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("watching address %s: %w", a, err)
	}
	return nil
}

// BlackholeAddr reports SYNs to a, a watched pod address, that the node's
// kernel drops before they reach a pod (EventBlackholed), from now until
// the address is unwatched or watched again (its next pod). Call it when
// the address's pod begins terminating.
func (k *Kernel) BlackholeAddr(a netip.Addr) error {
	key := addrKey(a)
	if err := k.maps.byName["local_dsts"].Update(&key, uint8(dstWatched|dstBlackhole), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("watching address %s for blackholed connections: %w", a, err)
	}
	return nil
}

// local_dsts values (enum dst_flags in bpf/drainwatch.h).
const (
	dstWatched   = 1
	dstBlackhole = 2
)

// UnwatchAddr stops tracking node-local connections to a. Unknown ones are
// ignored.
func (k *Kernel) UnwatchAddr(a netip.Addr) error {
	key := addrKey(a)
	err := k.maps.byName["local_dsts"].Delete(&key)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unwatching address %s: %w", a, err)
	}
	return nil
}

// addrKey lays an address out as struct addr_key: IPv4 (also IPv4-mapped
// IPv6) in the first four bytes.
func addrKey(a netip.Addr) [16]byte {
	var key [16]byte
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		copy(key[:], b[:])
		return key
	}
	return a.As16()
}

func (k *Kernel) watch(kind uint32, id uint64, flags uint8) error {
	key := scopeKey{Id: id, Kind: kind}
	if err := k.maps.scopes.Update(&key, flags, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("watching scope %d/%d: %w", kind, id, err)
	}
	return nil
}

func (k *Kernel) unwatch(kind uint32, id uint64) error {
	key := scopeKey{Id: id, Kind: kind}
	err := k.maps.scopes.Delete(&key)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unwatching scope %d/%d: %w", kind, id, err)
	}
	return nil
}
