package realnode

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// relay is the node's way to the API server: a listener on the node
// namespace's loopback whose connections are dialled on to the API server's
// loopback address from the root namespace. No route joins the two
// namespaces; only this process carries bytes between them.
type relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// startRelay listens on 127.0.0.1:0 inside ns and forwards to target
// ("127.0.0.1:<port>" in the root namespace).
func startRelay(ns *netlab.NS, target string) (*relay, error) {
	ln, err := ns.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's address inside the node namespace.
func (r *relay) Addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.pipe(c)
	}
}

func (r *relay) pipe(c net.Conn) {
	defer r.wg.Done()
	up, err := net.Dial("tcp", r.target) // this goroutine's thread is in the root namespace
	if err != nil {
		c.Close()
		return
	}
	if !r.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
	r.untrack(c, up)
}

func (r *relay) track(cs ...net.Conn) bool {
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

func (r *relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}

// Close stops accepting, cuts every relayed connection and waits.
func (r *relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
