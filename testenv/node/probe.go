package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/testenv/node/kubeletprobe"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeKind is readiness or liveness.
type probeKind string

const (
	readiness probeKind = "Readiness"
	liveness  probeKind = "Liveness"
	startup   probeKind = "Startup"
)

// probeResult is a change of a probe's verdict (after the thresholds).
type probeResult struct {
	kind      probeKind
	container *container
	passing   bool
}

// prober runs one probe of one container at its period until ctx ends,
// and reports verdict changes: success/failure thresholds are counted like
// the kubelet's worker (readiness starts failing, liveness passing).
type prober struct {
	a       *Agent
	pod     *corev1.Pod
	podIP   string
	c       *container
	kind    probeKind
	spec    *corev1.Probe
	results chan<- probeResult
}

func (p *prober) run(ctx context.Context) {
	passing := p.kind == liveness
	ok, bad := 0, 0
	select {
	case <-time.After(time.Duration(p.spec.InitialDelaySeconds) * time.Second):
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(time.Duration(max(p.spec.PeriodSeconds, 1)) * time.Second)
	defer tick.Stop()
	for {
		// The kubelet probes running containers only: this run's probes end
		// with it (a restart starts new ones).
		if !p.c.running() {
			return
		}
		err := p.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			ok, bad = ok+1, 0
		} else {
			ok, bad = 0, bad+1
			msg := err.Error()
			if e, ok := err.(*execError); ok {
				msg = e.output
			}
			p.a.events.record(p.pod, p.c.spec.Name, corev1.EventTypeWarning, ReasonUnhealthy,
				fmt.Sprintf("%s probe failed: %s", p.kind, msg))
		}
		changed, final := p.verdict(&passing, ok, bad)
		if changed {
			select {
			case p.results <- probeResult{kind: p.kind, container: p.c, passing: passing}:
			case <-ctx.Done():
				return
			}
		}
		if final {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// verdict flips passing when the consecutive count reaches its threshold.
// A startup probe reports once, success or failure, and is then done
// (final).
func (p *prober) verdict(passing *bool, ok, bad int) (changed, final bool) {
	succeeded := ok >= int(max(p.spec.SuccessThreshold, 1))
	failed := bad >= int(max(p.spec.FailureThreshold, 1))
	switch {
	case p.kind == startup && (succeeded || failed):
		*passing = succeeded
		return true, true
	case !*passing && succeeded:
		*passing = true
		return true, false
	case *passing && failed:
		*passing = false
		return true, false
	}
	return false, false
}

// once runs one probe attempt. tcpSocket and httpGet go through the
// kubelet prober process (from the node's namespace, comm "kubelet");
// exec runs inside the container.
func (p *prober) once(ctx context.Context) error {
	timeout := time.Duration(max(p.spec.TimeoutSeconds, 1)) * time.Second
	if p.spec.Exec != nil {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return p.a.runHandler(ctx, handler{Exec: p.spec.Exec}, p.c, p.podIP)
	}
	req, err := p.request(timeout)
	if err != nil {
		return err
	}
	// The prober bounds the attempt by the timeout; the slack only guards
	// against a prober that stopped answering.
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	resp, err := p.a.kubelet.call(ctx, req)
	if err != nil {
		return err
	}
	if resp.Err != "" {
		return errors.New(resp.Err)
	}
	return nil
}

// request describes a tcpSocket or httpGet probe for the kubelet prober.
func (p *prober) request(timeout time.Duration) (kubeletprobe.Request, error) {
	req := kubeletprobe.Request{TimeoutMS: timeout.Milliseconds(), Probe: string(p.kind),
		Pod: p.pod.Namespace + "/" + p.pod.Name, Container: p.c.spec.Name}
	var host string
	var port intstr.IntOrString
	switch {
	case p.spec.TCPSocket != nil:
		req.Op, host, port = kubeletprobe.OpTCPSocket, p.spec.TCPSocket.Host, p.spec.TCPSocket.Port
	case p.spec.HTTPGet != nil:
		g := p.spec.HTTPGet
		req.Op, host, port = kubeletprobe.OpHTTPGet, g.Host, g.Port
		req.Scheme, req.Path = strings.ToLower(string(g.Scheme)), g.Path
		for _, h := range g.HTTPHeaders {
			req.Headers = append(req.Headers, kubeletprobe.Header{Name: h.Name, Value: h.Value})
		}
	default:
		return req, fmt.Errorf("container %s: %s probe has no supported action", p.c.spec.Name, p.kind)
	}
	n, err := resolvePort(port, &p.c.spec)
	if err != nil {
		return req, err
	}
	req.Target = net.JoinHostPort(hostOr(host, p.podIP), strconv.Itoa(n))
	return req, nil
}
