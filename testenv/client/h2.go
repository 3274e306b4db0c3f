package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// H2 is a bounded HTTP/2 cleartext workload (prior knowledge, as gRPC and
// h2c servers speak it), one connection per record: Idle connections that
// send no request and only exchange PINGs every PingEvery (SETTINGS and
// their acks at the start), and Pending connections that each send one GET
// for Path and wait for its answer. Frames are written by hand with
// golang.org/x/net/http2's Framer so the record says exactly what the
// server did: answer, RST_STREAM, GOAWAY, or a closed or reset connection.
type H2 struct {
	Dial           DialFunc
	Target         string
	Idle, Pending  int
	Path           string        // the pending requests' path: "/slow?ms=3000"
	PingEvery      time.Duration // 100 ms when zero
	Hold           time.Duration // idle connections' lifetime, and every connection's bound; required
	MaxConnections int           // bound on Idle+Pending; 64 when zero
}

// H2Conn is the record of one HTTP/2 connection.
type H2Conn struct {
	Target, Local string
	Path          string // the request's path; "" on an idle connection
	Start, End    time.Time
	Pings         int  // PINGs the server acknowledged
	GoAway        bool // the server sent GOAWAY
	Status        int  // :status of the response, when one arrived
	// Outcome: an idle connection is OK when it lasted Hold and the client
	// closed it; a pending one is OK on a complete 2xx response. Otherwise
	// GoneAway, EOF, Reset, StreamReset, Timeout, Refused…
	Outcome Outcome
	Err     string
}

// H2Result is the ground truth of one run.
type H2Result struct {
	Idle, Pending []H2Conn
}

// H2Run is a started H2 workload.
type H2Run struct {
	conns []*h2conn
	idle  int
	wg    sync.WaitGroup
}

func (h *H2) validate() error {
	if h.PingEvery == 0 {
		h.PingEvery = 100 * time.Millisecond
	}
	if h.MaxConnections == 0 {
		h.MaxConnections = 64
	}
	if h.Hold <= 0 || h.Idle < 0 || h.Pending < 0 || h.Idle+h.Pending > h.MaxConnections {
		return fmt.Errorf("h2 workload to %s: want a positive hold and at most %d connections (got %v, %d+%d)",
			h.Target, h.MaxConnections, h.Hold, h.Idle, h.Pending)
	}
	return nil
}

// Start opens every connection and returns once each has sent its preface,
// SETTINGS and (pending) its request, or has failed.
func (h H2) Start(ctx context.Context) (*H2Run, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	run := &H2Run{idle: h.Idle}
	for i := 0; i < h.Idle+h.Pending; i++ {
		path := ""
		if i >= h.Idle {
			path = h.Path
		}
		c := &h2conn{H2Conn: H2Conn{Target: h.Target, Path: path}, sent: make(chan struct{})}
		run.conns = append(run.conns, c)
		run.wg.Add(1)
		go func() { defer run.wg.Done(); c.run(ctx, h) }()
	}
	for _, c := range run.conns {
		<-c.sent
	}
	return run, nil
}

// Wait waits for every connection to end and returns their records.
func (r *H2Run) Wait() H2Result {
	r.wg.Wait()
	var res H2Result
	for i, c := range r.conns {
		if i < r.idle {
			res.Idle = append(res.Idle, c.H2Conn)
		} else {
			res.Pending = append(res.Pending, c.H2Conn)
		}
	}
	return res
}

// SummarizeH2 counts connections per outcome.
func SummarizeH2(conns []H2Conn) Summary {
	s := Summary{}
	for _, c := range conns {
		s[c.Outcome]++
	}
	return s
}
