package collector

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// TraceRecord is one line of `drainwatch trace --format json`. Fields that do
// not apply to a type are left out; exit_code is present on every exit
// (0 is a real code).
type TraceRecord struct {
	Type         string `json:"type"`
	Time         string `json:"time"`
	Netns        uint32 `json:"netns,omitempty"`
	CgroupID     uint64 `json:"cgroup_id,omitempty"`
	PID          uint32 `json:"pid,omitempty"`
	TID          uint32 `json:"tid,omitempty"`
	Comm         string `json:"comm,omitempty"`
	Local        string `json:"local,omitempty"`
	Remote       string `json:"remote,omitempty"`
	SockCookie   uint64 `json:"sock_cookie,omitempty"`
	Reason       uint32 `json:"reason,omitempty"`
	Signal       uint32 `json:"signal,omitempty"`
	SignalResult string `json:"signal_result,omitempty"`
	SenderPID    uint32 `json:"sender_pid,omitempty"`
	SenderComm   string `json:"sender_comm,omitempty"`
	SenderCgroup uint64 `json:"sender_cgroup_id,omitempty"`
	TargetInit   bool   `json:"target_init,omitempty"`
	ExitCode     *int32 `json:"exit_code,omitempty"`
	ExitSignal   uint32 `json:"exit_signal,omitempty"`
	Cause        string `json:"cause,omitempty"`
	Inflight     string `json:"inflight,omitempty"`
	IdleMS       uint32 `json:"idle_ms,omitempty"`
}

func traceRecord(ev *Event) TraceRecord {
	j := TraceRecord{
		Type: ev.Type.String(), Time: ev.Time.UTC().Format(time.RFC3339Nano),
		Netns: ev.NetnsIno, CgroupID: ev.CgroupID, PID: ev.PID, TID: ev.TID, Comm: ev.Comm.String(),
		Local: addrString(ev.Local), Remote: addrString(ev.Remote), SockCookie: ev.SockCookie,
		Reason: ev.Reason, Signal: ev.Signal, SenderPID: ev.SenderPID, SenderComm: ev.SenderComm.String(),
		SenderCgroup: ev.SenderCgroup, TargetInit: ev.TargetInit, ExitSignal: ev.ExitSignal,
	}
	switch ev.Type {
	case EventSignal:
		j.SignalResult = ev.SignalResult.String()
	case EventExit:
		code := ev.ExitCode
		j.ExitCode = &code
	case EventConnClosedInflight:
		j.Cause, j.Inflight = ev.Cause.String(), ev.Inflight.String()
	case EventIdleClose:
		j.IdleMS = ev.Seq
	}
	return j
}

func addrString(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// WriteTraceJSON writes ev as one line of `drainwatch trace --format json`.
func WriteTraceJSON(w io.Writer, ev *Event) {
	b, err := json.Marshal(traceRecord(ev))
	if err != nil {
		return // cannot happen: only strings and numbers
	}
	w.Write(append(b, '\n'))
}

// WriteTraceText writes ev as one human line of `drainwatch trace`: time,
// type, netns, then the fields its kind's Text writes.
func WriteTraceText(w io.Writer, ev *Event) {
	j := traceRecord(ev)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-20s netns=%d", ev.Time.Format("15:04:05.000000000"), j.Type, j.Netns)
	ev.Type.Kind().Text(&b, &j)
	// Command names are any process's to set (prctl PR_SET_NAME).
	io.WriteString(w, Printable(b.String()))
	io.WriteString(w, "\n")
}

func signalText(b *strings.Builder, j *TraceRecord) {
	fmt.Fprintf(b, " sig=%d pid=%d comm=%s init=%t from=%d/%s result=%s",
		j.Signal, j.PID, j.Comm, j.TargetInit, j.SenderPID, j.SenderComm, j.SignalResult)
}

func exitText(b *strings.Builder, j *TraceRecord) {
	fmt.Fprintf(b, " pid=%d comm=%s code=%d sig=%d init=%t", j.PID, j.Comm, *j.ExitCode, j.ExitSignal, j.TargetInit)
}

// idleText is an idle_close's: the connection, how long it was idle and
// the task that closed it.
func idleText(b *strings.Builder, j *TraceRecord) {
	fmt.Fprintf(b, " %s <- %s idle=%dms pid=%d comm=%s", j.Local, j.Remote, j.IdleMS, j.PID, j.Comm)
}

func socketText(b *strings.Builder, j *TraceRecord) {
	fmt.Fprintf(b, " %s <- %s", j.Local, j.Remote)
	if j.Reason != 0 {
		fmt.Fprintf(b, " reason=%d", j.Reason)
	}
	if j.Cause != "" {
		fmt.Fprintf(b, " cause=%s inflight=%s pid=%d comm=%s", j.Cause, j.Inflight, j.PID, j.Comm)
	}
	if j.SenderPID != 0 {
		// A connection opened by a task of this node (a kubelet probe).
		fmt.Fprintf(b, " from=%d/%s", j.SenderPID, j.SenderComm)
	}
}
