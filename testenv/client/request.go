package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// DialFunc opens a connection, e.g. (*netlab.NS).Dial to start it inside a
// network namespace, or (&net.Dialer{}).DialContext on loopback.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Request is the record of one request.
type Request struct {
	Seq     int       // position in its load run (0 for a single request)
	Path    string    // "/work", "/slow?ms=2000", "/ready"
	Target  string    // address dialed: a pod or the router
	Local   string    // the client's address, to join with the router's records
	Start   time.Time // before the connect
	End     time.Time // outcome known
	Outcome Outcome
	Status  int    // HTTP status when a response was read
	Err     string // the error behind a non-OK outcome
	// Reused: sent on a keep-alive connection that had carried a request
	// before (KeepAlive).
	Reused bool
	// ServerReset: a reused connection's request met the server's RST
	// after its FIN (KeepAlive).
	ServerReset bool
}

// Duration is End − Start.
func (r Request) Duration() time.Duration { return r.End.Sub(r.Start) }

// Get sends one GET on a new connection to target and records it. sent, when
// not nil, is closed once the request bytes are written (or the request failed
// before that).
func Get(ctx context.Context, dial DialFunc, target, path string, timeout time.Duration, sent chan<- struct{}) (r Request) {
	r = Request{Path: path, Target: target, Start: time.Now()}
	defer func() { r.End = time.Now() }()
	sentOnce := func() {
		if sent != nil {
			close(sent)
			sent = nil
		}
	}
	defer sentOnce()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, "tcp", target)
	if err != nil {
		r.fail(err)
		return r
	}
	defer conn.Close()
	r.Local = conn.LocalAddr().String()
	_ = conn.SetDeadline(r.Start.Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, target); err != nil {
		r.fail(err)
		return r
	}
	sentOnce()
	r.readFrom(bufio.NewReader(conn))
	return r
}

// readFrom reads one whole response; a body cut short is not OK.
func (r *Request) readFrom(br *bufio.Reader) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		r.fail(err)
		return
	}
	defer resp.Body.Close()
	r.Status = resp.StatusCode
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		r.fail(err)
		return
	}
	r.Outcome = OK
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.Outcome = HTTPStatus(resp.StatusCode)
	}
}

func (r *Request) fail(err error) {
	r.Outcome, r.Err = classify(err), err.Error()
}
