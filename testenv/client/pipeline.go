package client

import (
	"bufio"
	"context"
	"net"
	"strings"
	"time"
)

// Pipeline sends a GET for every path back to back on one connection
// (HTTP/1.1 pipelining: one write, no waiting for answers) and reads the
// responses in order. It returns one record per request, in order: the
// answered ones OK or HTTPStatus, every later one the outcome that ended the
// connection. sent, when not nil, is closed once the requests are written
// (or the connection failed before that). The whole exchange is bounded by
// timeout.
func Pipeline(ctx context.Context, dial DialFunc, target string, paths []string, timeout time.Duration, sent chan<- struct{}) []Request {
	reqs := make([]Request, len(paths))
	start := time.Now()
	for i, p := range paths {
		reqs[i] = Request{Seq: i, Path: p, Target: target, Start: start}
	}
	defer func() {
		if sent != nil {
			close(sent)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, "tcp", target)
	if err != nil {
		return failFrom(reqs, 0, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(start.Add(timeout))
	if _, err := conn.Write(pipelined(target, paths)); err != nil {
		return failFrom(reqs, 0, err)
	}
	if sent != nil {
		close(sent)
		sent = nil
	}
	return readPipelined(conn, reqs)
}

// pipelined is the requests as one buffer, so they leave in one write.
func pipelined(target string, paths []string) []byte {
	var b strings.Builder
	for _, p := range paths {
		b.WriteString("GET " + p + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	}
	return []byte(b.String())
}

// readPipelined reads the responses in order; the first failure ends every
// request not yet answered.
func readPipelined(conn net.Conn, reqs []Request) []Request {
	br := bufio.NewReader(conn)
	local := conn.LocalAddr().String()
	for i := range reqs {
		reqs[i].Local = local
		reqs[i].readFrom(br)
		reqs[i].End = time.Now()
		if r := reqs[i]; r.Outcome != OK && r.Outcome != HTTPStatus(r.Status) {
			return endFrom(reqs, i+1, r.Outcome, r.Err)
		}
	}
	return reqs
}

// failFrom marks reqs[from:] as ended by err.
func failFrom(reqs []Request, from int, err error) []Request {
	return endFrom(reqs, from, classify(err), err.Error())
}

// endFrom gives reqs[from:] the outcome that ended their connection.
func endFrom(reqs []Request, from int, o Outcome, err string) []Request {
	now := time.Now()
	for i := from; i < len(reqs); i++ {
		reqs[i].Outcome, reqs[i].Err, reqs[i].End = o, err, now
	}
	return reqs
}
