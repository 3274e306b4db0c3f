package kernel

import (
	"errors"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/drainwatch/drainwatch/collector"
)

// pollInterval bounds how long an event waits in the ring buffer when the
// BPF side skipped the wakeup (see event_submit in bpf/drainwatch.h), while
// events flow. Each empty poll doubles the wait up to pollIdle: a quiet
// node (the usual case: a termination is rare) wakes the reader a few
// times a second instead of fifty, and the first record read returns to
// pollInterval. A burst never waits for the poll: past WAKEUP_BYTES the
// BPF side wakes the reader.
const (
	pollInterval = 20 * time.Millisecond
	pollIdle     = 320 * time.Millisecond
)

// read is the only goroutine reading the ring buffer. It decodes into one
// reused record and event, and never blocks on the consumer: when the
// Events channel is full the event is dropped and counted. The exception is
// the backlog the ring buffer held when the reader opened (what a resumed
// run collected while the daemon was down, up to the ring's size): it waits for room,
// because it may be larger than the channel, and while it waits the ring
// buffer keeps the newer events (the kernel counts what does not fit). The
// backlog ends at the producer position seen at open, whatever it holds
// (discarded records too): the first record past it ends the waiting.
func (k *Kernel) read() {
	defer close(k.done)
	defer close(k.events)
	var (
		rec       ringbuf.Record
		ev        collector.Event
		backoff   time.Duration
		inBacklog = k.backlog.bytes() > 0
		poll      = pollInterval
		read      bool // a record since the last poll
	)
	k.reader.SetDeadline(time.Now().Add(poll))
	for {
		if err := k.reader.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The BPF side does not wake us per event: look again
				// after the next poll.
				poll, read = nextPoll(poll, read), false
				k.reader.SetDeadline(time.Now().Add(poll))
				backoff = k.readSucceeded(backoff)
				continue
			}
			backoff = k.readFailed(err, backoff)
			continue
		}
		backoff, read = k.readSucceeded(backoff), true
		inBacklog = k.handleRecord(rec.RawSample, &ev, inBacklog)
	}
}

// nextPoll is the wait before the next poll of the ring buffer: back to
// pollInterval after a poll that found records, twice the last one (up to
// pollIdle) after an empty one.
func nextPoll(last time.Duration, read bool) time.Duration {
	if read {
		return pollInterval
	}
	return min(2*last, pollIdle)
}

// handleRecord is what the reader does per record (TestRecordPathAllocs
// holds it to zero allocations): decode into ev, count, hand on. It returns
// whether the reader is still in the backlog.
func (k *Kernel) handleRecord(raw []byte, ev *collector.Event, inBacklog bool) bool {
	if err := decodeEvent(raw, k.clock, ev); err != nil || !ev.Type.Known() {
		k.invalid.Add(1)
		return inBacklog
	}
	k.counts[ev.Type].Add(1)
	if inBacklog && k.backlog.holdsLastRead() {
		k.deliverWaiting(*ev)
		return true
	}
	k.deliver(*ev)
	return false
}

// deliver hands ev to the consumer, or drops and counts it when the Events
// channel is full.
func (k *Kernel) deliver(ev collector.Event) {
	select {
	case k.events <- ev:
	default:
		k.dropped.Add(1)
	}
}

// deliverWaiting waits for room in the Events channel until Close.
func (k *Kernel) deliverWaiting(ev collector.Event) {
	select {
	case k.events <- ev:
		return
	default:
	}
	select {
	case k.events <- ev:
	case <-k.stop:
		k.dropped.Add(1)
	}
}

// readFailed logs the first error of a run of failures and sleeps with a
// doubling backoff (at most one second), so a broken reader never spins.
func (k *Kernel) readFailed(err error, backoff time.Duration) time.Duration {
	k.readErrs.failed(err)
	if backoff == 0 {
		k.log.Error().Err(err).Msg("reading the eBPF ring buffer; retrying with backoff")
		backoff = 10 * time.Millisecond
	}
	time.Sleep(backoff)
	return min(2*backoff, time.Second)
}

// readSucceeded ends a run of read errors (an empty poll is a working read).
func (k *Kernel) readSucceeded(backoff time.Duration) time.Duration {
	if backoff != 0 {
		k.readErrs.recovered()
	}
	return 0
}

// Stats are the collector's counters since Open.
type Stats struct {
	// Events counts decoded events per type (including dropped ones).
	Events map[collector.EventType]uint64
	// LostInKernel counts events the BPF side could not reserve in the ring
	// buffer (it was full).
	LostInKernel uint64
	// LostInKernelByType splits LostInKernel by the type of the record that
	// found the ring full (types that lost nothing are absent; nil after
	// Close).
	LostInKernelByType map[collector.EventType]uint64
	// Dropped counts events decoded but dropped because the Events channel
	// was full.
	Dropped uint64
	// Invalid counts records that did not decode (should stay 0).
	Invalid uint64
	// Untracked counts accepted connections the kernel could not track
	// (its connection map was full): their in-flight state is unknown.
	Untracked uint64
	// Evicted counts, per LRU map (local_syns, group_exits), the entries
	// it forgot to make room: see MapEvictions.
	Evicted map[string]uint64
}

// Lost is every event the collector failed to deliver, for
// drainwatch_kernel_events_lost_total.
func (s Stats) Lost() uint64 { return s.LostInKernel + s.Dropped + s.Invalid }

// Stats reads the counters; LostInKernel is summed over CPUs from BPF.
func (k *Kernel) Stats() (Stats, error) {
	s := Stats{Events: map[collector.EventType]uint64{}, Dropped: k.dropped.Load(), Invalid: k.invalid.Load()}
	for _, t := range collector.EventTypes() {
		s.Events[t] = k.counts[t].Load()
	}
	if final := k.finalLost.Load(); final != nil {
		s.LostInKernel = *final
		return s, nil
	}
	var lerr, uerr, eerr error
	s.LostInKernelByType, lerr = k.maps.lostInKernelByType()
	for _, n := range s.LostInKernelByType {
		s.LostInKernel += n
	}
	s.Untracked, uerr = k.maps.untrackedInKernel()
	s.Evicted, eerr = k.MapEvictions(time.Now())
	return s, errors.Join(lerr, uerr, eerr)
}
