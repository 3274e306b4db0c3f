package daemon

import (
	"fmt"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
)

// HTTP/2 tracking (--http2-tracking): whether the kernel's message probes
// follow HTTP/2 streams (collector/kernel MessageProbes). Without them an
// HTTP/2 connection is judged by the socket rule, like every other one.
const (
	// HTTP2Auto attaches the message probes while at least one pod of the
	// node declares a port named for HTTP/2 (collector.HTTP2PortName).
	HTTP2Auto = "auto"
	// HTTP2Always keeps them attached.
	HTTP2Always = "always"
	// HTTP2Off never attaches them.
	HTTP2Off = "off"
)

// messageProbesMode maps --http2-tracking to the kernel's option.
func messageProbesMode(tracking string) (kernel.MessageProbes, error) {
	switch tracking {
	case HTTP2Auto, "":
		return kernel.MessageProbesOnDemand, nil
	case HTTP2Always:
		return kernel.MessageProbesAlways, nil
	case HTTP2Off:
		return kernel.MessageProbesOff, nil
	}
	return 0, fmt.Errorf("--http2-tracking %q: want auto, always or off", tracking)
}

// messageSwitch is the kernel's run-time switch of the message probes
// (*kernel.Kernel has it; a fake kernel may not).
type messageSwitch interface {
	SetMessageProbes(on bool) error
}

// http2Pods is the set of the node's pods declaring an HTTP/2 port, and
// drives the message probes in auto mode: attached while it is not empty.
type http2Pods struct {
	uids     map[string]bool
	attached bool
}

// podUpdate and podDeleted keep the set; they report whether the probes
// must now be attached (on) and whether that changed.
func (h *http2Pods) podUpdate(p collector.Pod) (on, changed bool) {
	if p.HTTP2 {
		if h.uids == nil {
			h.uids = map[string]bool{}
		}
		h.uids[p.UID] = true
	} else {
		delete(h.uids, p.UID)
	}
	return h.settle()
}

func (h *http2Pods) podDeleted(uid string) (on, changed bool) {
	delete(h.uids, uid)
	return h.settle()
}

func (h *http2Pods) settle() (on, changed bool) {
	on = len(h.uids) > 0
	changed = on != h.attached
	h.attached = on
	return on, changed
}

// followHTTP2 applies a pod change to the message probes in auto mode.
func (d *Daemon) followHTTP2(on, changed bool) {
	if !changed || d.cfg.HTTP2Tracking != HTTP2Auto {
		return
	}
	sw, ok := d.kernel.(messageSwitch)
	if !ok {
		return
	}
	if err := sw.SetMessageProbes(on); err != nil {
		d.log.Warn().Err(err).Bool("attach", on).Msg("switching the HTTP/2 message probes: HTTP/2 connections are judged by the socket rule")
		return
	}
	d.log.Info().Bool("attached", on).Int("http2_pods", len(d.http2.uids)).Msg("HTTP/2 message probes switched (--http2-tracking=auto)")
}
