package kernel

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// rawEventSize is the size of struct event (bpf/drainwatch.h).
const rawEventSize = int(unsafe.Sizeof(rawEvent{}))

var errShortRecord = errors.New("ring buffer record shorter than struct event")

// wallClock converts bpf_ktime_get_ns (CLOCK_MONOTONIC) to wall-clock time
// with one offset measured at start, so every event converts the same way:
// a step of the realtime clock afterwards (NTP, `date -s`) shifts no mark
// and reorders none.
type wallClock struct{ offsetNs int64 }

func newWallClock() (wallClock, error) { return measureWallClock(monotonicNs, realtimeNs) }

// measureWallClock takes the offset between the two clocks once; the
// clocks are parameters so that a test can step a fake realtime clock
// (stepping the machine's would disturb every other process on it).
func measureWallClock(mono func() (int64, error), realtime func() int64) (wallClock, error) {
	m, err := mono()
	if err != nil {
		return wallClock{}, fmt.Errorf("reading CLOCK_MONOTONIC: %w", err)
	}
	return wallClock{offsetNs: realtime() - m}, nil
}

func monotonicNs() (int64, error) {
	var ts unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano(), err
}

func realtimeNs() int64 { return time.Now().UnixNano() }

func (c wallClock) wall(monoNs uint64) time.Time {
	return time.Unix(0, int64(monoNs)+c.offsetNs)
}

// decodeEvent fills ev from one ring-buffer record. The record is the
// kernel's struct event in native byte order: a length-checked cast reads it
// without copying or allocating.
func decodeEvent(b []byte, clk wallClock, ev *collector.Event) error {
	if len(b) < rawEventSize {
		return errShortRecord
	}
	r := (*rawEvent)(unsafe.Pointer(&b[0]))
	*ev = collector.Event{
		Type:         collector.EventType(r.Type),
		Time:         clk.wall(r.TsNs),
		NetnsIno:     r.Netns,
		CgroupID:     r.CgroupId,
		PID:          r.Pid,
		TID:          r.Tid,
		Comm:         comm(&r.Comm),
		Local:        addrPort(r.Family, &r.Laddr, r.Lport),
		Remote:       addrPort(r.Family, &r.Raddr, r.Rport),
		SockCookie:   r.Cookie,
		Reason:       r.Reason,
		Seq:          r.Seq,
		Signal:       r.Signal,
		SenderPID:    r.SenderPid,
		SenderComm:   comm(&r.SenderComm),
		SenderCgroup: r.SenderCgroup,
		TargetInit:   r.TargetInit != 0,
		Cause:        collector.CloseCause(r.Cause),
		Inflight:     collector.InflightKind(r.Inflight),
	}
	if ev.Type == collector.EventSignal {
		ev.SignalResult = collector.SignalResult(r.SignalResult)
	}
	if ev.Type == collector.EventExit {
		ev.ExitCode, ev.ExitSignal = exitStatus(r.ExitStatus)
	}
	return nil
}

// exitStatus turns a wait status (task->exit_code) into the shell-style code
// and the terminating signal: 128+signal when a signal killed the process.
func exitStatus(status int32) (code int32, sig uint32) {
	if s := status & 0x7f; s != 0 {
		return 128 + s, uint32(s)
	}
	return (status >> 8) & 0xff, 0
}

const (
	afInet  = 2
	afInet6 = 10
)

// addrPort reads an address in network byte order. IPv4-mapped IPv6
// addresses (dual-stack listeners) are unmapped so a client's 10.0.0.2 reads
// the same whichever socket family the server used.
func addrPort(family uint16, a *[16]uint8, port uint16) netip.AddrPort {
	switch family {
	case afInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), port)
	case afInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(*a).Unmap(), port)
	}
	return netip.AddrPort{}
}

func comm(c *[16]int8) collector.Comm {
	return *(*collector.Comm)(unsafe.Pointer(c))
}
