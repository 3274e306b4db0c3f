package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// MessageProbes says when the per-message programs run: sock_recv and
// sock_send (tp_btf/sock_recv_length, sock_send_length, Linux >= 6.3),
// which follow HTTP/2 framing (bpf/h2.h) so that an HTTP/2 connection is in
// flight exactly when a stream is open. They run on every read and write
// of every socket of the node, so they are off unless asked for. Every
// other connection, and an HTTP/2 connection they did not follow from its
// preface, is judged at teardown from its socket's own state
// (bpf/inflight.h), which costs nothing per message and works on every
// kernel.
type MessageProbes int

const (
	// MessageProbesOff never attaches them (the default).
	MessageProbesOff MessageProbes = iota
	// MessageProbesOnDemand loads them detached; SetMessageProbes
	// attaches and detaches them at run time.
	MessageProbesOnDemand
	// MessageProbesAlways attaches them at Open (SetMessageProbes still
	// works).
	MessageProbesAlways
)

// ProbeDetached is a probe left detached on purpose (the message probes,
// off or waiting to be asked for): it feeds no events and is not a fault.
const ProbeDetached ProbeState = "detached"

// messageProbes is the runtime switch of the per-message programs: the
// object stays loaded, only its links come and go.
type messageProbes struct {
	mu       sync.Mutex
	mode     MessageProbes
	obj      probeObject
	watchAll bool
	coll     *ebpf.Collection // loaded at Open, or at the first attach after a resume
	links    []link.Link      // parallel to obj.progs; nil while detached
	// unavailable is why they cannot run on this kernel.
	unavailable error
	// pinDir is where attached links are pinned, once the Kernel's pins
	// are published (empty: not pinning).
	pinDir string
}

func (m *messageProbes) attached() bool { return m.links != nil }

// openMessageProbes loads the object (unless off) and attaches it when
// the mode says always, reporting both probes.
func (k *Kernel) openMessageProbes(obj probeObject, opts Options) error {
	m := &k.msg
	m.mode, m.obj, m.watchAll = opts.MessageProbes, obj, opts.WatchAll
	if opts.MessageProbes == MessageProbesOff {
		if _, err := tracepointArgs("sock_recv_length"); err != nil {
			m.unavailable = fmt.Errorf("sock_recv_length is not in kernel BTF (Linux < 6.3): %w", err)
		}
		k.reportMessageProbes()
		return nil
	}
	if err := k.attachMessageProbes(opts.MessageProbes == MessageProbesAlways); err != nil {
		return err
	}
	return nil
}

// SetMessageProbes attaches (on) or detaches (off) the per-message
// programs at run time. Connections accepted while they are detached, and
// HTTP/2 connections they were following when they are detached, are
// judged by the socket rule for the rest of their life (bpf/inflight.h).
// It fails with MessageProbesOff and on kernels without the tracepoints.
func (k *Kernel) SetMessageProbes(on bool) error {
	if k.msg.mode == MessageProbesOff {
		return errors.New("the message probes are off (kernel.Options.MessageProbes)")
	}
	if on {
		return k.attachMessageProbes(true)
	}
	return k.detachMessageProbes()
}

// MessageProbesAttached reports whether the per-message programs run.
func (k *Kernel) MessageProbesAttached() bool {
	k.msg.mu.Lock()
	defer k.msg.mu.Unlock()
	return k.msg.attached()
}

// attachMessageProbes loads the object when needed and, with attach,
// attaches both programs (pinned with the others when pinning).
func (k *Kernel) attachMessageProbes(attach bool) error {
	m := &k.msg
	m.mu.Lock()
	defer m.mu.Unlock()
	defer k.reportMessageProbes()
	if m.unavailable != nil {
		return m.unavailable
	}
	if m.coll == nil {
		coll, err := loadObject(m.obj, m.watchAll, k.maps)
		if err != nil {
			m.unavailable = err
			return err
		}
		m.coll = coll
	}
	if !attach || m.attached() {
		return nil
	}
	links, err := k.attachMessageLinks()
	if err != nil {
		m.unavailable = err
		return err
	}
	m.links = links
	return nil
}

func (k *Kernel) attachMessageLinks() ([]link.Link, error) {
	m := &k.msg
	var links []link.Link
	for _, p := range m.obj.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: m.coll.Programs[p.prog], AttachType: ebpf.AttachTraceRawTp})
		if err == nil && m.pinDir != "" {
			err = l.Pin(filepath.Join(m.pinDir, linkPinName(p)))
		}
		if err != nil {
			closeLinks(links)
			if l != nil {
				l.Close()
			}
			return nil, fmt.Errorf("attaching %s: %w", p.hook, err)
		}
		links = append(links, l)
	}
	return links, nil
}

// detachMessageProbes removes the links (and their pins), then hands every
// connection they were following to the socket rule: streams opened or
// ended from now on would go unseen.
func (k *Kernel) detachMessageProbes() error {
	m := &k.msg
	m.mu.Lock()
	defer m.mu.Unlock()
	defer k.reportMessageProbes()
	if !m.attached() {
		return nil
	}
	var errs []error
	for _, l := range m.links {
		if err := l.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		errs = append(errs, l.Close())
	}
	m.links = nil
	errs = append(errs, k.forgetFraming())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detaching the message probes: %w", err)
	}
	return nil
}

// Values of enum conn_proto (bpf/h2.h).
const (
	protoUnknown = 0
	protoPreface = 1
	protoH2      = 2
	protoOther   = 3
	protoH2Lost  = 4
)

// forgetFraming marks every connection the message probes were following
// as judged by the socket rule, so a later attach does not trust framing
// state with a gap in it.
func (k *Kernel) forgetFraming() error {
	conns := k.maps.byName["conns"]
	var key uint64
	var c inflightConn
	var errs []error
	it := conns.Iterate()
	for it.Next(&key, &c) {
		switch c.Proto {
		case protoH2:
			c.Proto = protoH2Lost
		case protoUnknown, protoPreface:
			c.Proto = protoOther
		default:
			continue
		}
		// UpdateExist: a connection torn down meanwhile stays deleted.
		if err := conns.Update(key, c, ebpf.UpdateExist); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, it.Err())...)
}

// reportMessageProbes sets both probes' status from the switch's state.
func (k *Kernel) reportMessageProbes() {
	m := &k.msg
	st, detail := ProbeAttached, ""
	switch {
	case m.unavailable != nil:
		st, detail = ProbeUnavailable, m.unavailable.Error()+"; in flight is decided from the socket's state, HTTP/2 streams are not followed"
	case m.attached():
		detail = "HTTP/2 streams followed on connections accepted from now on"
	case m.mode == MessageProbesOff:
		st, detail = ProbeDetached, "off by option: in flight is decided from the socket's state"
	default:
		st, detail = ProbeDetached, "detached until HTTP/2 tracking is asked for: in flight is decided from the socket's state"
	}
	for _, p := range m.obj.progs {
		k.setProbe(ProbeStatus{Name: p.name, Hook: p.hook, State: st, Detail: detail, Optional: true})
	}
}

// setProbe replaces the status of the probe of the same name, or adds it.
func (k *Kernel) setProbe(st ProbeStatus) {
	k.probesMu.Lock()
	defer k.probesMu.Unlock()
	for i := range k.probes {
		if k.probes[i].Name == st.Name {
			if k.probes[i] != st {
				k.log.Info().Str("probe", st.Name).Str("hook", st.Hook).Str("state", string(st.State)).Str("why", st.Detail).Msg("eBPF probe")
			}
			k.probes[i] = st
			return
		}
	}
	k.probes = append(k.probes, st)
	k.log.Info().Str("probe", st.Name).Str("hook", st.Hook).Str("state", string(st.State)).Str("why", st.Detail).Msg("eBPF probe")
}

// closeMessageProbes closes the links (pinned ones stay attached) and the
// object.
func (k *Kernel) closeMessageProbes() error {
	m := &k.msg
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, l := range m.links {
		errs = append(errs, l.Close())
	}
	if m.coll != nil {
		m.coll.Close()
	}
	return errors.Join(errs...)
}

// loadPinnedMessageLinks reopens the message probes' pinned links: both
// (they were attached) or none (detached, or unavailable).
func loadPinnedMessageLinks(dir string, obj probeObject) ([]link.Link, error) {
	var links []link.Link
	for _, p := range obj.progs {
		l, err := link.LoadPinnedLink(filepath.Join(dir, linkPinName(p)), nil)
		if errors.Is(err, os.ErrNotExist) {
			closeLinks(links)
			return nil, nil
		}
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("loading the pinned link of %s: %w", p.hook, err)
		}
		links = append(links, l)
	}
	return links, nil
}

// resumeMessageProbes applies the mode to the pinned links taken over:
// always attaches, off detaches, on demand keeps the previous run's state
// until SetMessageProbes.
func (k *Kernel) resumeMessageProbes() error {
	switch k.msg.mode {
	case MessageProbesAlways:
		if err := k.attachMessageProbes(true); err != nil {
			k.log.Warn().Err(err).Msg("attaching the message probes")
		}
	case MessageProbesOff:
		return k.detachMessageProbes()
	}
	return nil
}

// has reports whether p is one of the message probes.
func (m *messageProbes) has(p probeProg) bool {
	for _, q := range m.obj.progs {
		if q.prog == p.prog {
			return true
		}
	}
	return false
}
