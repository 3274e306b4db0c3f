// Package client is testenv's ground truth: it sends plain HTTP/1.1 requests,
// one TCP connection each, open loop (a fixed interval, bounded in count and in
// duration), and records for every request when it started and ended, which
// address it went to and how it ended. drainwatch's counts are checked against
// these records.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
)

// Outcome is how one request ended, as the client saw it.
type Outcome string

// Outcomes. A response with a non-2xx status is HTTPStatus(code).
const (
	OK          Outcome = "ok"           // 2xx response read completely
	Refused     Outcome = "refused"      // connect got ECONNREFUSED (RST to the SYN)
	Reset       Outcome = "reset"        // ECONNRESET/EPIPE after the connection was established
	EOF         Outcome = "eof"          // the server closed without a (complete) response
	Timeout     Outcome = "timeout"      // no answer within the request timeout
	Unreachable Outcome = "unreachable"  // no route (ENETUNREACH, EHOSTUNREACH)
	Failed      Outcome = "error"        // anything else; Request.Err says what
	StreamReset Outcome = "stream_reset" // HTTP/2: the server reset the request's stream (RST_STREAM)
	GoneAway    Outcome = "goaway"       // HTTP/2: the server sent GOAWAY and closed the connection
)

// HTTPStatus is the outcome of a complete response with a non-2xx status.
func HTTPStatus(code int) Outcome { return Outcome(fmt.Sprintf("http_%d", code)) }

// classify maps a connect, write or read error to an outcome.
func classify(err error) Outcome {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return Reset
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return Unreachable
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return EOF
	}
	return Failed
}

// Summary counts requests per outcome.
type Summary map[Outcome]int

// Summarize counts the outcomes of reqs.
func Summarize(reqs []Request) Summary {
	s := Summary{}
	for _, r := range reqs {
		s[r.Outcome]++
	}
	return s
}

// Total is the number of requests counted.
func (s Summary) Total() int {
	n := 0
	for _, c := range s {
		n += c
	}
	return n
}

// String prints the counts sorted by outcome: "ok=3 refused=44".
func (s Summary) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, s[Outcome(k)])
	}
	return strings.Join(parts, " ")
}
