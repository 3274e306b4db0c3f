package collector

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"
)

// KernelOptions configures OpenKernel.
type KernelOptions struct {
	// Logger receives one line per probe at start and reader errors.
	Logger zerolog.Logger
	// WatchAll reports events of every network namespace and cgroup (trace
	// without filters). Otherwise only scopes added with Watch* are reported.
	WatchAll bool
	// Buffer is the capacity of the Events channel (default 8192). When the
	// consumer falls behind, events are dropped and counted, never queued
	// without bound.
	Buffer int
	// RefusedFallback forces the kfree_skb source for refused connections
	// even where tcp_send_reset has a reason (used to test the fallback).
	RefusedFallback bool
}

// Kernel is the loaded and attached set of eBPF probes and the reader that
// turns their ring buffer into Events.
type Kernel struct {
	log     zerolog.Logger
	maps    sharedMaps
	colls   []*ebpf.Collection
	links   []link.Link
	probes  []ProbeStatus
	reader  *ringbuf.Reader
	clock   wallClock
	events  chan Event
	done    chan struct{}
	counts  [eventTypeCount]atomic.Uint64
	dropped atomic.Uint64
	invalid atomic.Uint64
	// finalLost keeps the kernel's lost count once the maps are closed, so
	// Stats still answers after Close (for a final summary).
	finalLost atomic.Pointer[uint64]
	closeOnce sync.Once
	closeErr  error
}

// OpenKernel checks the environment, loads and attaches every probe the
// kernel supports and starts reading events. Probes that cannot attach are
// reported by Probes and logged; OpenKernel fails only when the environment
// is unusable or no probe attached.
func OpenKernel(opts KernelOptions) (*Kernel, error) {
	if err := preflight(opts.Logger); err != nil {
		return nil, err
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 8192
	}
	k := &Kernel{log: opts.Logger, events: make(chan Event, opts.Buffer), done: make(chan struct{})}
	var err error
	if k.maps, err = newSharedMaps(); err != nil {
		return nil, err
	}
	if err := k.attachAll(opts); err != nil {
		k.closeKernelObjects()
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
	go k.read()
	return k, nil
}

// Events delivers decoded events. It is closed after Close.
func (k *Kernel) Events() <-chan Event { return k.events }

// Probes reports, per probe, whether it is attached and why not.
func (k *Kernel) Probes() []ProbeStatus { return append([]ProbeStatus(nil), k.probes...) }

// Close stops the reader (closing the ring buffer unblocks it), waits for it
// to finish, then detaches every probe and frees the maps.
// Closing twice is harmless.
func (k *Kernel) Close() error {
	k.closeOnce.Do(func() {
		err := k.reader.Close()
		<-k.done
		lost, lerr := k.maps.lostInKernel()
		k.finalLost.Store(&lost)
		k.closeErr = errors.Join(err, lerr, k.closeKernelObjects())
	})
	return k.closeErr
}

func (k *Kernel) closeKernelObjects() error {
	var errs []error
	for _, l := range k.links {
		errs = append(errs, l.Close())
	}
	for _, c := range k.colls {
		c.Close()
	}
	errs = append(errs, k.maps.close())
	return errors.Join(errs...)
}
