package collector

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EventType names one kind of kernel observation. The String form is the
// vocabulary of `drainwatch trace` output and of the kernel_events metric.
type EventType uint8

const (
	EventUnknown EventType = iota
	// EventAccept is a passive TCP connection reaching ESTABLISHED.
	EventAccept
	// EventListenOpen is a socket entering TCP_LISTEN.
	EventListenOpen
	// EventListenClose is a listening socket leaving TCP_LISTEN.
	EventListenClose
	// EventRefused is an RST sent because no socket exists (a SYN to a closed port).
	EventRefused
	// EventReset is any other RST sent by a socket in a watched scope.
	EventReset
	// EventSignal is a signal generated to a task in a watched scope.
	EventSignal
	// EventExit is a process (thread-group leader) exit.
	EventExit
	// EventConnClosedInflight is an accepted connection torn down while a
	// request was in flight.
	EventConnClosedInflight
	// EventBlackholed is a SYN to a terminating pod's address that the
	// node's kernel dropped before it reached the pod (its network is
	// gone): Reason is the skb drop reason, Seq the SYN's sequence number,
	// NetnsIno the namespace of the device that dropped it (the node's, or
	// another pod's for a flooded copy).
	EventBlackholed
	// EventIdleClose is the pod's server closing an accepted connection
	// that had carried no data for at least kernel.IdleCloseMin (its
	// keep-alive idle timeout): Seq is that idle time in ms (Idle), PID
	// and Comm the closing task. A pool in front that reuses the
	// connection afterwards gets a reset on reuse.
	EventIdleClose
	// NumEventTypes counts the types, EventUnknown included: the length of
	// arrays indexed by EventType.
	NumEventTypes
)

// CloseCause says why an in-flight connection was torn down.
type CloseCause uint8

const (
	CauseUnknown CloseCause = iota
	// CauseSigkill: the owning process exited after SIGKILL.
	CauseSigkill
	// CauseSignal: the owning process exited after another fatal signal.
	CauseSignal
	// CauseClose: the connection was closed or reset by the process itself
	// (or by a normal exit) with the request still unanswered.
	CauseClose
)

var closeCauseNames = [...]string{"unknown", "sigkill", "signal", "close"}

func (c CloseCause) String() string { return nameOf(closeCauseNames[:], uint8(c), "cause") }

// Comm is a task's command name as the kernel keeps it (TASK_COMM_LEN).
type Comm [16]byte

func (c Comm) String() string {
	for i, b := range c {
		if b == 0 {
			return string(c[:i])
		}
	}
	return string(c[:])
}

// Event is one kernel observation. It is a plain value (no pointers beyond
// netip's) so the ring-buffer reader can decode into a reused Event and hand
// copies to the correlator without allocating.
//
// Socket events (accept, listen_*, refused, reset, conn_closed_inflight) run in
// softirq or on behalf of another task: attribute them by NetnsIno and
// addresses, never by PID/CgroupID, which are only set where they are the
// socket owner's: listen_open and listen_close (listen() and a listener's
// last close run in the owner's context, which names the container of a
// pod of several) and a reset its owner sent. Process events (signal,
// exit) carry the target/exiting task's PID, TGID and CgroupID.
type Event struct {
	Type EventType
	// Time is wall-clock time with ns resolution, converted once from the
	// kernel's monotonic clock.
	Time time.Time
	// NetnsIno is the inode number of the socket's (or task's) network namespace.
	NetnsIno uint32
	// CgroupID is the cgroup v2 id of the task (target task for signals).
	CgroupID uint64
	// PID is the thread-group id (the user-space "pid") of the task; TID the thread id.
	PID, TID uint32
	Comm     Comm

	// Local and Remote are the socket's addresses from the server's side:
	// for refused, Local is the closed port the SYN was sent to.
	Local, Remote netip.AddrPort
	// SockCookie identifies a socket across its events (0 where no socket exists).
	SockCookie uint64
	// Reason is the kernel's RST reason (sk_rst_reason / skb drop reason) for
	// refused and reset events.
	Reason uint32
	// Seq is the refused SYN's sequence number: a SYN the client
	// retransmits (its RST was lost on the way) carries the same one. For
	// idle_close, the connection's idle time in ms (Idle).
	Seq uint32

	// Signal fields: Signal number, the sender, and whether the target is the
	// init (PID 1) of its PID namespace. On accept and refused events the
	// Sender fields name the node-local task that opened the connection
	// (a kubelet probe, a node-local proxy), zero for remote clients.
	Signal       uint32
	SenderPID    uint32
	SenderComm   Comm
	SenderCgroup uint64
	TargetInit   bool
	// SignalResult is what the kernel did with the signal when it was
	// generated: a stop signal "ignored" by a namespace init without a
	// handler is the evidence for stop_signal_ignored. (Added by issue 2.)
	SignalResult SignalResult

	// Exit fields: ExitCode is the shell-style status (0-255, 128+signal when
	// the process died of a signal); ExitSignal the terminating signal or 0.
	// TargetInit (above) is set for the init of a PID namespace.
	ExitCode   int32
	ExitSignal uint32

	// Cause and Inflight are set for conn_closed_inflight: why it was
	// torn down and what was in flight.
	Cause    CloseCause
	Inflight InflightKind
}

// Idle is an idle_close's idle time: how long the connection had carried
// no data when the server closed it, to the kernel's tick (1/HZ).
func (e *Event) Idle() time.Duration {
	if e.Type != EventIdleClose {
		return 0
	}
	return time.Duration(e.Seq) * time.Millisecond
}

// InflightKind says what made a connection in flight when it was torn down.
type InflightKind uint8

const (
	InflightNone InflightKind = iota
	// InflightRequest: the peer sent a request the server had not answered
	// (request bytes read after the last response bytes sent).
	InflightRequest
	// InflightUnread: request bytes still unread in the receive queue.
	InflightUnread
	// InflightStream: an HTTP/2 stream (a gRPC call, a server stream) the
	// server had not ended.
	InflightStream
)

var inflightKindNames = [...]string{"none", "request", "unread", "stream"}

func (k InflightKind) String() string { return nameOf(inflightKindNames[:], uint8(k), "inflight") }

// SignalName names a signal number the way kill -l does ("SIGTERM"); 0 is
// SIGTERM, the stop signal when a container configures none.
func SignalName(sig uint32) string {
	if sig == 0 {
		sig = uint32(unix.SIGTERM)
	}
	if name := unix.SignalName(syscall.Signal(sig)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", sig)
}

// nameOf is the String of a small enum: its name, or kind(n) for a value
// this build does not know (a newer BPF object).
func nameOf(names []string, v uint8, kind string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}
