package kubeletprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// prober runs probes and keeps the tally of their connection attempts.
type prober struct {
	mu      sync.Mutex
	counts  map[string]*Count
	log     []Attempt
	dropped int
}

func newProber() *prober { return &prober{counts: map[string]*Count{}} }

// probe runs one tcpSocket or httpGet probe bounded by its timeout, like
// the kubelet's prober (pkg/probe/tcp, pkg/probe/http).
func (p *prober) probe(req Request) Response {
	timeout := time.Duration(max(req.TimeoutMS, 1)) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp := Response{ID: req.ID}
	var err error
	switch req.Op {
	case OpTCPSocket:
		err = p.tcpSocket(ctx, req)
	case OpHTTPGet:
		resp.Status, err = p.httpGet(ctx, req)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		resp.Err = err.Error()
	}
	return resp
}

// tcpSocket connects and closes: the kubelet's tcp probe.
func (p *prober) tcpSocket(ctx context.Context, req Request) error {
	conn, err := p.dial(ctx, req)
	if err != nil {
		return err
	}
	return conn.Close()
}

// httpGet sends one GET on a connection of its own (no keep-alive, as the
// kubelet's prober) and passes on a status from 200 to 399.
func (p *prober) httpGet(ctx context.Context, req Request) (int, error) {
	scheme := req.Scheme
	if scheme == "" {
		scheme = "http"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, req.Target, req.Path)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("httpGet %s: %w", url, err)
	}
	for _, h := range req.Headers {
		hreq.Header.Add(h.Name, h.Value)
	}
	hreq.Header.Set("User-Agent", UserAgent)
	if hreq.Header.Get("Accept") == "" {
		hreq.Header.Set("Accept", "*/*")
	}
	tr := &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dial(ctx, req) }}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Do(hreq)
	if err != nil {
		return 0, err // `Get "<url>": dial tcp …`, the kubelet's probe message
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return resp.StatusCode, fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// dial makes one connection attempt to the request's target and records it.
func (p *prober) dial(ctx context.Context, req Request) (net.Conn, error) {
	a := Attempt{Target: req.Target, Op: req.Op, Probe: req.Probe, Pod: req.Pod, Container: req.Container,
		Start: time.Now()}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", req.Target)
	a.End = time.Now()
	switch {
	case err == nil:
		a.Outcome = Accepted
	case errors.Is(err, syscall.ECONNREFUSED):
		a.Outcome, a.Err = Refused, err.Error()
	default:
		a.Outcome, a.Err = Failed, err.Error()
	}
	p.record(a)
	return conn, err
}

func (p *prober) record(a Attempt) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts[a.Target]
	if c == nil {
		c = &Count{}
		p.counts[a.Target] = c
	}
	c.Attempts++
	switch a.Outcome {
	case Accepted:
		c.Accepted++
	case Refused:
		c.Refused++
	default:
		c.Errors++
	}
	if len(p.log) == MaxLog {
		// Keep the newest: a test asks about the termination it just
		// caused. The oldest tenth goes at once, so appending stays cheap.
		n := copy(p.log, p.log[MaxLog/10:])
		p.dropped += len(p.log) - n
		p.log = p.log[:n]
	}
	p.log = append(p.log, a)
}

// snapshot answers OpCounts with copies of the counts and the log.
func (p *prober) snapshot(id uint64) Response {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := Response{ID: id, Counts: make(map[string]Count, len(p.counts)), LogDropped: p.dropped}
	for t, c := range p.counts {
		resp.Counts[t] = *c
	}
	resp.Log = append([]Attempt(nil), p.log...)
	return resp
}
