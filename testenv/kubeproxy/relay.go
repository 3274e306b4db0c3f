package kubeproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// relay forwards connections accepted on a node namespace's loopback to the
// API server on the root namespace's loopback. The listening socket is
// created inside the node namespace; the dials run on ordinary goroutines,
// hence from the root namespace, and only ever to the API server's loopback
// address.
type relay struct {
	ln     net.Listener
	target string
	log    zerolog.Logger
	wg     sync.WaitGroup
	once   sync.Once

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startRelay listens on listen (inside ns) and forwards to target, which
// must be a loopback "ip:port".
func startRelay(ns *netlab.NS, listen, target string, log zerolog.Logger) (*relay, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("relay target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("relay target %q: only a loopback API server is relayed", target)
	}
	ln, err := ns.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("relay listener in %s: %w", ns, err)
	}
	r := &relay{ln: ln, target: target, log: log, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Error().Err(err).Msg("kube-proxy relay: accept")
			}
			return
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.forward(in) }()
	}
}

// forward copies both ways until either side closes.
func (r *relay) forward(in net.Conn) {
	out, err := net.Dial("tcp", r.target)
	if err != nil {
		r.log.Warn().Err(err).Msg("kube-proxy relay: dialing the API server")
		in.Close()
		return
	}
	if !r.track(in, out) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	r.untrack(in, out)
	<-done
}

func (r *relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}

// close stops accepting, closes every relayed connection and waits.
func (r *relay) close() {
	r.once.Do(func() {
		r.ln.Close()
		r.mu.Lock()
		for c := range r.conns {
			c.Close()
		}
		r.conns = nil
		r.mu.Unlock()
		r.wg.Wait()
	})
}
