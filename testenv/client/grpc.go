package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// GRPC is a bounded gRPC workload against the standard health service of
// `dwserver --mode=grpc`, every call on its own connection (grpc.NewClient
// per call, insecure, dialed through Dial): Unary Check calls the server
// holds for Hold, Streams Watch streams (a status every 100 ms) that the
// client cancels after Duration, and Idle connections that reach READY,
// keep keepalive pings on and make no call until Duration has passed.
type GRPC struct {
	Dial                 DialFunc
	Target               string
	Unary, Streams, Idle int
	Hold                 time.Duration // each Check's hold on the server
	Duration             time.Duration // streams' and idle connections' lifetime; unary calls time out at Hold+Duration. Required.
	MaxConnections       int           // bound on Unary+Streams+Idle; 64 when zero
	KeepaliveTime        time.Duration // client keepalive pings; 10 s (grpc-go's floor) when zero
}

// CallKind is what a GRPCCall did.
type CallKind string

// Call kinds.
const (
	UnaryCall  CallKind = "unary"  // Health/Check
	StreamCall CallKind = "stream" // Health/Watch
	IdleConn   CallKind = "idle"   // a connection with no call
)

// GRPCCall is the record of one call (or idle connection), as grpc-go
// reported it.
type GRPCCall struct {
	Kind       CallKind
	Start, End time.Time
	// Code: a Check's status code; a Watch's code, codes.OK when the server
	// ended it and codes.DeadlineExceeded when the client ended it after
	// Duration;
	// an idle connection's is OK (it makes no call) unless it never became
	// READY (Unavailable).
	Code     codes.Code
	Err      string
	Messages int  // responses received
	Lost     bool // idle: the connection left READY before Duration passed
}

// GRPCResult is the ground truth of one run.
type GRPCResult struct {
	Unary, Streams, Idle []GRPCCall
}

func (g *GRPC) validate() error {
	if g.MaxConnections == 0 {
		g.MaxConnections = 64
	}
	if g.KeepaliveTime == 0 {
		g.KeepaliveTime = 10 * time.Second
	}
	n := g.Unary + g.Streams + g.Idle
	if g.Duration <= 0 || g.Hold < 0 || g.Unary < 0 || g.Streams < 0 || g.Idle < 0 || n > g.MaxConnections {
		return fmt.Errorf("grpc workload to %s: want a positive duration and at most %d connections (got %v, %d)",
			g.Target, g.MaxConnections, g.Duration, n)
	}
	return nil
}

// GRPCRun is a started GRPC workload.
type GRPCRun struct {
	calls []*grpcCall
	wg    sync.WaitGroup
}

// Start opens every connection and starts every call; it returns once each
// call's request is written (idle: each connection is READY), or it failed.
func (g GRPC) Start(ctx context.Context) (*GRPCRun, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	run := &GRPCRun{}
	kinds := map[CallKind]int{UnaryCall: g.Unary, StreamCall: g.Streams, IdleConn: g.Idle}
	for _, kind := range []CallKind{UnaryCall, StreamCall, IdleConn} {
		for i := 0; i < kinds[kind]; i++ {
			c := &grpcCall{GRPCCall: GRPCCall{Kind: kind}, sent: make(chan struct{})}
			run.calls = append(run.calls, c)
			run.wg.Add(1)
			go func() { defer run.wg.Done(); c.run(ctx, g) }()
		}
	}
	for _, c := range run.calls {
		<-c.sent
	}
	return run, nil
}

// Wait waits for every call to end and returns their records.
func (r *GRPCRun) Wait() GRPCResult {
	r.wg.Wait()
	var res GRPCResult
	for _, c := range r.calls {
		switch c.Kind {
		case UnaryCall:
			res.Unary = append(res.Unary, c.GRPCCall)
		case StreamCall:
			res.Streams = append(res.Streams, c.GRPCCall)
		default:
			res.Idle = append(res.Idle, c.GRPCCall)
		}
	}
	return res
}

// String counts calls per kind and code, plus lost idle connections:
// "idle OK=2 lost=2 | stream Unavailable=2 | unary Unavailable=3".
func (r GRPCResult) String() string {
	var parts []string
	for _, calls := range [][]GRPCCall{r.Idle, r.Streams, r.Unary} {
		if len(calls) > 0 {
			parts = append(parts, string(calls[0].Kind)+" "+countCodes(calls))
		}
	}
	return strings.Join(parts, " | ")
}

func countCodes(calls []GRPCCall) string {
	n, lost := map[string]int{}, 0
	for _, c := range calls {
		n[c.Code.String()]++
		if c.Lost {
			lost++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%s=%d", k, n[k])
	}
	if lost > 0 {
		keys = append(keys, fmt.Sprintf("lost=%d", lost))
	}
	return strings.Join(keys, " ")
}
