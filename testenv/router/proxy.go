package router

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Conn outcomes as the router saw them.
const (
	Proxied   = "proxied"    // backend connected, bytes spliced both ways
	Refused   = "refused"    // the backend refused (ECONNREFUSED): client reset
	DialError = "dial_error" // another dial failure: client reset
	NoBackend = "no_backend" // no ready endpoint applied: client reset
)

// Conn is the router's record of one accepted client connection (of one
// request in KeepAlive mode).
type Conn struct {
	Client   string // client's address as the router saw it (= client.Request.Local)
	Backend  string // "ip:port" picked, empty with NoBackend
	Accepted time.Time
	// Dialed is when the backend dial returned (TCP mode): the backend saw
	// the SYN between Accepted and Dialed.
	Dialed  time.Time
	Outcome string
	Err     string
	Reused  bool // KeepAlive mode: sent over a pooled backend connection
	// BackendReset: a Proxied connection the backend reset (e.g. a
	// connection still in its accept queue when the listener closed); the
	// client saw a reset too. Set once the splice has ended.
	BackendReset bool
	// BackendSilent: a Proxied connection the backend closed without
	// sending a byte (a server shutting down closes a connection whose
	// request it has read but not answered); the client saw EOF.
	BackendSilent bool
	Status        int // KeepAlive mode: the HTTP status the client got
}

// serve accepts until the listener is closed.
func (r *Router) serve(ctx context.Context) {
	for {
		c, err := r.cfg.Listener.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				r.log.Error().Err(err).Msg("accept failed; router stops accepting")
			}
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(ctx, c)
		}()
	}
}

// handle picks a backend and splices. A client of a real L4 load balancer
// (kube-proxy's DNAT) sees the backend's RST to its SYN as ECONNREFUSED; a
// userspace proxy has already completed the client's handshake, so the
// closest it can do is reset the client connection (SO_LINGER 0): the client
// sees ECONNRESET, and the router's record says Refused with the backend.
func (r *Router) handle(ctx context.Context, c net.Conn) {
	rec := Conn{Client: c.RemoteAddr().String(), Accepted: time.Now()}
	backend, ok := r.table.Pick()
	if !ok {
		rec.Outcome = NoBackend
		r.record(rec)
		resetConn(c)
		return
	}
	rec.Backend = backend
	dctx, cancel := context.WithTimeout(ctx, r.cfg.DialTimeout)
	b, err := r.cfg.Dial(dctx, "tcp", backend)
	cancel()
	rec.Dialed = time.Now()
	if err != nil {
		rec.Outcome, rec.Err = DialError, err.Error()
		if errors.Is(err, syscall.ECONNREFUSED) {
			rec.Outcome = Refused
		}
		r.record(rec)
		resetConn(c)
		return
	}
	rec.Outcome = Proxied
	i := r.record(rec)
	reset, sent := splice(c, b)
	r.markBackendEnd(i, reset, !reset && sent == 0)
}

// splice copies both ways. A FIN is passed on as a FIN (half close); a reset
// on one side resets the other, so a backend killed mid-request shows to the
// client as a reset, as it would through a NAT. It reports whether the
// backend reset the connection and how many bytes it sent.
func splice(client, backend net.Conn) (backendReset bool, sent int64) {
	done := make(chan struct{})
	go func() { pipe(backend, client); close(done) }()
	backendReset, sent = pipe(client, backend)
	<-done
	client.Close()
	backend.Close()
	return backendReset, sent
}

// pipe copies src to dst and reports whether src was reset and how many
// bytes it copied; a reset is passed on to dst, a FIN as a half close.
func pipe(dst, src net.Conn) (srcReset bool, n int64) {
	r := &readSide{r: src}
	n, err := io.Copy(dst, r)
	if err != nil && errors.Is(err, syscall.ECONNRESET) {
		resetConn(dst)
		return errors.Is(r.err, syscall.ECONNRESET), n
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	return false, n
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// readSide remembers the read error, to tell src's reset from dst's.
type readSide struct {
	r   io.Reader
	err error
}

func (s *readSide) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil {
		s.err = err
	}
	return n, err
}
