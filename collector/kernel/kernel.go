package kernel

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
)

// Options configures Open.
type Options struct {
	// Logger receives one line per probe at start and reader errors.
	Logger zerolog.Logger
	// WatchAll reports events of every network namespace and cgroup (trace
	// without filters). Otherwise only scopes added with Watch* are reported.
	WatchAll bool
	// Detail reports every accept of every watched network namespace as an
	// event (trace with filters), as if SetDetail were on for each.
	Detail bool
	// Buffer is the capacity of the Events channel (default 8192). When the
	// consumer falls behind, events are dropped and counted, never queued
	// without bound.
	Buffer int
	// RefusedFallback forces the kfree_skb source for refused connections
	// even where tcp_send_reset has a reason (used to test the fallback).
	RefusedFallback bool
	// RefusedByLocation forces the source for kernels without drop reasons
	// (kfree_skb called from tcp_v4_rcv on a bare SYN), to test it on any
	// kernel.
	RefusedByLocation bool
	// ExitFallback forces the exit source for kernels without
	// sched_process_exit's group_dead (signal->live, deduplicated per
	// thread group), to test it on any kernel.
	ExitFallback bool
	// PinPath, when set (a directory on bpffs), pins the shared maps and
	// the links there (see kernel_pin.go): Close leaves the programs
	// collecting into the ring buffer, and the next Open with the same
	// PinPath and the same programs resumes them (Resumed). Empty: nothing
	// is pinned and Close detaches everything.
	PinPath string
	// NoResume loads fresh programs even when resumable pins exist, then
	// removes the old ones: for a caller with no saved state to continue
	// (the unread events of the previous run would belong to nobody).
	NoResume bool
	// MessageProbes says when the per-message programs that follow
	// HTTP/2 streams run (default off; see MessageProbes and
	// SetMessageProbes).
	MessageProbes MessageProbes
	// RingBufferSize is the size in bytes of the ring buffer the probes
	// write events into: a power of two, at least one page (default
	// DefaultRingBufferSize). The kernel maps it twice into the reader and
	// fills it at creation, so the daemon's RSS carries it twice.
	RingBufferSize int
}

// Kernel is the loaded and attached set of eBPF probes and the reader that
// turns their ring buffer into Events.
type Kernel struct {
	log    zerolog.Logger
	maps   sharedMaps
	colls  []*ebpf.Collection
	links  []link.Link
	probes []ProbeStatus
	// probesMu guards probes: SetMessageProbes updates them at run time.
	probesMu sync.Mutex
	msg      messageProbes
	// procNetns reads every process's network namespace (the binder's).
	procNetns ProcessNetns
	// linkPins names each link's pin (parallel to links), when pinning.
	linkPins []string
	pins     *pinSet
	resumed  bool
	reader   *ringbuf.Reader
	// ring reads the ring buffer's positions; backlog is what it held when
	// the reader opened (a resumed run's downtime): delivered without
	// dropping, see read.
	ring      *ringPositions
	backlog   backlog
	startRead sync.Once
	stop      chan struct{}
	clock     wallClock
	events    chan collector.Event
	done      chan struct{}
	counts    [collector.NumEventTypes]atomic.Uint64
	dropped   atomic.Uint64
	readErrs  readFailures
	invalid   atomic.Uint64
	evictions evictions // see MapEvictions
	// finalLost keeps the kernel's lost count once the maps are closed, so
	// Stats still answers after Close (for a final summary).
	finalLost atomic.Pointer[uint64]
	closeOnce sync.Once
	closeErr  error

	// detailAll is Options.Detail or WatchAll: every watched netns sends a
	// record per accept.
	detailAll bool
}

// Open checks the environment, loads and attaches every probe the
// kernel supports and starts reading events. Probes that cannot attach are
// reported by Probes and logged; Open fails only when the environment
// is unusable or no probe attached.
func Open(opts Options) (*Kernel, error) {
	if err := preflight(opts.Logger, opts.PinPath); err != nil {
		return nil, err
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 8192
	}
	var err error
	if opts.RingBufferSize, err = RingBufferSize(opts.RingBufferSize); err != nil {
		return nil, err
	}
	k := &Kernel{log: opts.Logger, events: make(chan collector.Event, opts.Buffer), done: make(chan struct{}), stop: make(chan struct{}),
		detailAll: opts.Detail || opts.WatchAll}
	if err := k.load(opts); err != nil {
		return nil, err
	}
	if k.reader, err = ringbuf.NewReader(k.maps.events); err != nil {
		k.closeKernelObjects()
		return nil, fmt.Errorf("opening the ring buffer reader: %w", err)
	}
	if k.clock, err = newWallClock(); err != nil {
		k.reader.Close()
		k.closeKernelObjects()
		return nil, err
	}
	if k.ring, err = mapRingPositions(k.maps.events); err != nil {
		k.reader.Close()
		k.closeKernelObjects()
		return nil, err
	}
	// The reader has not started: the consumer position stays put.
	k.backlog = backlog{ring: k.ring, end: k.ring.producer()}
	if k.resumed {
		lost, _ := k.maps.lostInKernel()
		k.log.Info().Str("pins", k.pins.dir()).Int("backlog_bytes", k.backlog.bytes()).Uint64("lost_in_kernel", lost).
			Msg("resumed the pinned eBPF programs: the ring buffer kept what happened while drainwatch was down")
	}
	return k, nil
}

// load creates the maps and attaches the programs, or reopens pinned ones.
func (k *Kernel) load(opts Options) error {
	if opts.PinPath == "" {
		return k.loadFresh(opts)
	}
	var err error
	if k.pins, err = lockPins(opts.PinPath, opts); err != nil {
		return err
	}
	if err := k.pins.removeLeftovers(); err != nil {
		k.log.Warn().Err(err).Msg("removing half-published BPF pins")
	}
	if !opts.NoResume {
		err := k.resume(opts)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			k.log.Warn().Err(err).Msg("pinned eBPF objects are unusable: loading fresh ones")
		}
	}
	if err := k.loadFresh(opts); err != nil {
		k.pins.unlock()
		return err
	}
	if err := k.pinFresh(); err != nil {
		k.closeKernelObjects()
		return err
	}
	return nil
}

func (k *Kernel) loadFresh(opts Options) error {
	var err error
	if k.maps, err = newSharedMaps(uint32(opts.RingBufferSize)); err != nil {
		return err
	}
	if err := k.attachAll(opts); err != nil {
		k.closeKernelObjects()
		return err
	}
	return nil
}

// Events delivers decoded events. It is closed after Close. The reader
// starts with the first call, so events (a resumed run's backlog above all)
// wait in the ring buffer until someone consumes them.
func (k *Kernel) Events() <-chan collector.Event {
	k.startRead.Do(func() { go k.read() })
	return k.events
}

// Resumed reports whether Open reopened pinned programs that kept
// collecting since the previous Close: no event was missed meanwhile,
// except those counted in LostInKernel.
func (k *Kernel) Resumed() bool { return k.resumed }

// Probes reports, per probe, whether it is attached and why not.
func (k *Kernel) Probes() []ProbeStatus {
	k.probesMu.Lock()
	defer k.probesMu.Unlock()
	return append([]ProbeStatus(nil), k.probes...)
}

// Close stops the reader (closing the ring buffer unblocks it), waits for it
// to finish, then detaches every probe and frees the maps. With PinPath the
// pins keep the programs attached and the maps alive: events keep arriving
// in the ring buffer for the next run (see Unpin). Closing twice is harmless.
func (k *Kernel) Close() error {
	k.closeOnce.Do(func() {
		close(k.stop)
		k.startRead.Do(func() { close(k.events); close(k.done) })
		err := k.reader.Close()
		<-k.done
		err = errors.Join(err, k.ring.close())
		lost, lerr := k.maps.lostInKernel()
		k.finalLost.Store(&lost)
		k.closeErr = errors.Join(err, lerr, k.closeKernelObjects())
	})
	return k.closeErr
}

// Unpin removes this Kernel's pins, so that Close detaches its programs and
// frees its maps (`drainwatch run --unpin-on-exit`). Call it before Close:
// afterwards another process may own the pin directory. Without PinPath it
// does nothing.
func (k *Kernel) Unpin() error {
	if k.pins == nil {
		return nil
	}
	if k.pins.lock == nil {
		return errors.New("unpinning after Close: run drainwatch cleanup instead")
	}
	if err := os.RemoveAll(k.pins.dir()); err != nil {
		return fmt.Errorf("removing BPF pins: %w", err)
	}
	_ = os.Remove(k.pins.root) // only when nothing else is in it
	k.log.Info().Str("pins", k.pins.dir()).Msg("unpinned the eBPF programs: they detach at exit")
	return nil
}

func (k *Kernel) closeKernelObjects() error {
	errs := []error{k.closeMessageProbes(), k.procNetns.Close()}
	for _, l := range k.links {
		errs = append(errs, l.Close())
	}
	for _, c := range k.colls {
		c.Close()
	}
	errs = append(errs, k.maps.close(), k.pins.unlock())
	return errors.Join(errs...)
}
