package kernel

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// ProbeState says whether a probe feeds events.
type ProbeState string

const (
	ProbeAttached    ProbeState = "attached"
	ProbeFallback    ProbeState = "fallback"
	ProbeUnavailable ProbeState = "unavailable"
)

// ProbeStatus is one probe's outcome at start, for logs and for the
// drainwatch_probe_attached{probe} metric.
type ProbeStatus struct {
	// Name is a stable label: sock_state, sock_recv, sock_send, refused,
	// reset (below Linux 6.10, where refused does not see them), signal,
	// exit.
	Name string
	// Hook is what the program attached to, e.g. tp_btf/tcp_send_reset.
	Hook   string
	State  ProbeState
	Detail string
	// Optional: no count depends on this probe alone, so its absence
	// makes no termination partial (the message probes: without them
	// HTTP/2 connections are judged by the socket rule).
	Optional bool
	// Loses names what a fallback does not report (e.g. "resets"), empty
	// when it reports everything: its terminations are partial.
	Loses string
}

// Attached reports whether the probe feeds events (directly or through its
// fallback) or is detached on purpose (ProbeDetached, ready to attach).
func (p ProbeStatus) Attached() bool { return p.State != ProbeUnavailable }

// PartialReason is the partial reason every termination gets while this
// probe is missing or runs on a fallback that loses events, naming the
// probe (probe_unavailable:sock_recv, probe_fallback:refused); empty when
// the probe reports everything. An optional probe makes nothing partial.
func (p ProbeStatus) PartialReason() string {
	switch {
	case p.Optional:
	case p.State == ProbeUnavailable:
		return "probe_unavailable:" + p.Name
	case p.State == ProbeFallback && p.Loses != "":
		return "probe_fallback:" + p.Name
	}
	return ""
}

// probeObject is one BPF object (one concern) and the programs to attach.
type probeObject struct {
	load  func() (*ebpf.CollectionSpec, error)
	progs []probeProg
	// onDemand: attached and detached at run time (messageprobes.go).
	onDemand bool
}

type probeProg struct {
	name, prog, hook string
	fallback         string // non-empty: this program is a fallback, and why
	loses            string // what the fallback does not report
}

func probeObjects(opts Options) []probeObject {
	return []probeObject{
		{load: loadSockState, progs: []probeProg{{name: "sock_state", prog: "sock_state", hook: "tp_btf/inet_sock_set_state"}}},
		// The read and write hooks follow HTTP/2 cleartext framing
		// (bpf/h2.h) from the system call's user buffer, on demand
		// (MessageProbes). Every other connection is judged from its
		// socket's state at teardown (bpf/inflight.h).
		{load: loadInflight, onDemand: true, progs: []probeProg{
			{name: "sock_recv", prog: "sock_recv", hook: "tp_btf/sock_recv_length"},
			{name: "sock_send", prog: "sock_send", hook: "tp_btf/sock_send_length"},
		}},
		{load: loadRefused, progs: refusedSources(opts)},
		{load: loadSignal, progs: []probeProg{{name: "signal", prog: "signal_generate", hook: "tp_btf/signal_generate"}}},
		{load: loadExit, progs: []probeProg{exitSource(opts.ExitFallback)}},
		// Not optional: without it a termination that lost connections
		// only to a gone network would read clean, so every termination
		// is partial (probe_unavailable:blackhole) instead.
		{load: blackholeLoader(), progs: []probeProg{{name: "blackhole", prog: "kfree_skb_blackhole", hook: "tp_btf/kfree_skb"}}},
	}
}

// errNoDropReasons: kfree_skb names no drop reason before Linux 5.17, and
// without one a blackholed SYN cannot be told from any other drop.
var errNoDropReasons = errors.New("kfree_skb has no drop reason argument (Linux < 5.17): blackholed connections are not counted")

// blackholeLoader loads bpf/blackhole.bpf.c where kfree_skb has its reason
// argument, and otherwise fails with errNoDropReasons, which reports the
// probe unavailable.
func blackholeLoader() func() (*ebpf.CollectionSpec, error) {
	if n, err := tracepointArgs("kfree_skb"); err != nil || n < 3 {
		return func() (*ebpf.CollectionSpec, error) {
			if err != nil {
				return nil, fmt.Errorf("%w: reading the tracepoint from kernel BTF: %v", errNoDropReasons, err)
			}
			return nil, errNoDropReasons
		}
	}
	return loadBlackhole
}

// refusedSources picks the programs that see RSTs, so that each is seen
// once: tcp_send_reset alone when its reason argument exists (Linux >=
// 6.10, every RST); else tcp_send_reset without it for RSTs of sockets
// (probe "reset") and, for RSTs without a socket, kfree_skb with drop
// reason NO_SOCKET (Linux >= 5.17), else kfree_skb called from
// tcp_v4_rcv/tcp_v6_rcv on a bare SYN, which sees refusals only.
func refusedSources(opts Options) []probeProg {
	reset := probeProg{name: "reset", prog: "tcp_send_reset_sock", hook: "tp_btf/tcp_send_reset",
		fallback: "tcp_send_reset has no reason argument (Linux < 6.10): resets of full sockets with reason 0; those of timewait and request sockets, which no count uses, are not seen"}
	noSocket := probeProg{name: "refused", prog: "kfree_skb_no_socket", hook: "tp_btf/kfree_skb",
		fallback: "tcp_send_reset has no reason argument (Linux < 6.10): the segments answered with a RST for want of a socket, from their drop reason NO_SOCKET"}
	byLocation := probeProg{name: "refused", prog: "kfree_skb_rcv_syn", hook: "tp_btf/kfree_skb:tcp_v4_rcv",
		fallback: "no skb drop reasons (Linux < 5.17): a SYN freed by tcp_v4_rcv/tcp_v6_rcv counts as refused; RSTs answering other segments without a socket are not reported",
		loses:    "resets without a socket"}
	if opts.RefusedByLocation || opts.RefusedFallback {
		reset.fallback, noSocket.fallback, byLocation.fallback = "forced by option", "forced by option", "forced by option"
		if opts.RefusedByLocation {
			return []probeProg{byLocation, reset}
		}
		return []probeProg{noSocket, reset}
	}
	n, err := tracepointArgs("tcp_send_reset")
	if n >= 3 {
		return []probeProg{{name: "refused", prog: "tcp_send_reset", hook: "tp_btf/tcp_send_reset"}}
	}
	if err != nil {
		reset.fallback = fallbackWhy("", err)
		noSocket.fallback = reset.fallback
	}
	progs := []probeProg{noSocket}
	if n, err := tracepointArgs("kfree_skb"); err == nil && n < 3 {
		progs = []probeProg{byLocation}
	}
	if !kernelHasFunc("bpf_get_socket_ptr_cookie") {
		// Linux < 5.12: a reset's socket has no cookie to join its
		// accept and teardown by, and a generated identity would count
		// a connection reset at exit twice. Resets are not reported.
		progs[0].loses = "resets"
		progs[0].fallback += "; resets of sockets are not reported (no socket cookie for tracing programs before Linux 5.12)"
		return progs
	}
	return append(progs, reset)
}

// exitSource prefers sched_process_exit's group_dead argument, which says
// exactly once per process that its last thread exits. Without it (Linux
// < 6.16) signal->live reaching 0 says it, deduplicated per thread group in
// the kernel: the fallback loses nothing.
func exitSource(forceFallback bool) probeProg {
	p := probeProg{name: "exit", prog: "process_exit", hook: "tp_btf/sched_process_exit"}
	why := "forced by option"
	if !forceFallback {
		n, err := tracepointArgs("sched_process_exit")
		if n >= 2 {
			return p
		}
		why = fallbackWhy("sched_process_exit has no group_dead argument (Linux < 6.16): signal->live reaching 0, reported once per thread group", err)
	}
	p.prog = "process_exit_live"
	p.fallback = why
	return p
}

func fallbackWhy(why string, err error) string {
	if err != nil {
		return fmt.Sprintf("reading the tracepoint from kernel BTF: %v", err)
	}
	return why
}

// tracepointArgs counts a tracepoint's arguments from kernel BTF: the
// prototype of btf_trace_<name> minus its leading context pointer.
func tracepointArgs(name string) (int, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, err
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return 0, err
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return 0, fmt.Errorf("btf_trace_%s is not a function pointer", name)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return 0, fmt.Errorf("btf_trace_%s is not a function pointer", name)
	}
	return len(proto.Params) - 1, nil
}

// attachAll loads and attaches every object; one that fails is reported
// and skipped so the others still work.
func (k *Kernel) attachAll(opts Options) error {
	var firstErr error
	for _, obj := range probeObjects(opts) {
		attach := k.attachObject
		if obj.onDemand {
			attach = func(obj probeObject, _ bool) error { return k.openMessageProbes(obj, opts) }
		}
		if err := attach(obj, opts.WatchAll); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, p := range k.probes {
		if p.State == ProbeAttached || p.State == ProbeFallback {
			return nil
		}
	}
	return fmt.Errorf("no eBPF probe could attach: %w", firstErr)
}

func (k *Kernel) attachObject(obj probeObject, watchAll bool) error {
	coll, err := loadObject(obj, watchAll, k.maps)
	if err != nil {
		for _, p := range obj.progs {
			k.report(p, err)
		}
		return err
	}
	k.colls = append(k.colls, coll)
	var firstErr error
	for _, p := range obj.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[p.prog], AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			err = fmt.Errorf("attaching %s: %w", p.hook, err)
			firstErr = cmpOr(firstErr, err)
		} else {
			k.links = append(k.links, l)
			k.linkPins = append(k.linkPins, linkPinName(p))
		}
		k.report(p, err)
	}
	return firstErr
}

// loadObject keeps only the selected programs, sets the watch-everything
// constant and shares the maps every object uses.
func loadObject(obj probeObject, watchAll bool, maps sharedMaps) (*ebpf.Collection, error) {
	spec, err := obj.load()
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, p := range obj.progs {
		keep[p.prog] = true
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
	if err := spec.Variables["watch_all"].Set(watchAll); err != nil {
		return nil, fmt.Errorf("setting watch_all: %w", err)
	}
	if err := setCompat(spec); err != nil {
		return nil, err
	}
	// The shared ring buffer's size is a run-time option: the object's
	// definition must match it to take the replacement.
	spec.Maps["events"].MaxEntries = maps.events.MaxEntries()
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: maps.byName})
	if err != nil {
		return nil, fmt.Errorf("loading BPF programs: %w", err)
	}
	return coll, nil
}

func (k *Kernel) report(p probeProg, err error) {
	st := ProbeStatus{Name: p.name, Hook: p.hook, State: ProbeAttached, Loses: p.loses}
	ev := k.log.Info()
	switch {
	case err != nil:
		st.State, st.Detail = ProbeUnavailable, err.Error()
		ev = k.log.Warn().Err(err)
	case p.fallback != "":
		st.State, st.Detail = ProbeFallback, p.fallback
		ev = ev.Str("why", p.fallback)
	}
	k.probes = append(k.probes, st)
	ev.Str("probe", st.Name).Str("hook", st.Hook).Str("state", string(st.State)).Msg("eBPF probe")
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
