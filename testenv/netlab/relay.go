package netlab

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/rs/zerolog"
)

// Relay carries a node namespace's way to the API server: a listener on the
// node namespace's loopback whose connections are dialled on to a loopback
// address of the root namespace. No route joins the two namespaces; only
// this process carries bytes between them (the network rule), and only to
// loopback: StartRelay refuses any other target.
type Relay struct {
	ln     net.Listener
	target string
	log    zerolog.Logger
	wg     sync.WaitGroup
	once   sync.Once

	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed
}

// StartRelay listens on listen ("127.0.0.1:0" for any port) inside ns and
// forwards each connection to target, a loopback "ip:port" of the root
// namespace.
func StartRelay(ns *NS, listen, target string, log zerolog.Logger) (*Relay, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("relay target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("relay target %q: only a loopback address is relayed", target)
	}
	ln, err := ns.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("relay listener in %s: %w", ns, err)
	}
	r := &Relay{ln: ln, target: target, log: log, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's address inside the node namespace.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Error().Err(err).Msg("relay: accept")
			}
			return
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.forward(in) }()
	}
}

// forward copies both ways until both sides are done. The dial runs on an
// ordinary goroutine, hence from the root namespace.
func (r *Relay) forward(in net.Conn) {
	out, err := net.Dial("tcp", r.target)
	if err != nil {
		r.log.Warn().Err(err).Str("target", r.target).Msg("relay: dialing")
		in.Close()
		return
	}
	if !r.track(in, out) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
	r.untrack(in, out)
}

func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil { // closed
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

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}

// Close stops accepting, cuts every relayed connection and waits for the
// relay's goroutines. Closing twice is harmless.
func (r *Relay) Close() error {
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
	return nil
}
