package l7

import (
	"fmt"
	"strconv"
	"strings"
)

// HAProxyLogFormat is the log-format parseHAProxyLine reads: a tag, the
// client, the server, the status, the termination state, the retries and
// the request line.
const HAProxyLogFormat = "l7req %ci:%cp %si:%sp %ST %tsc %rc %{+Q}r"

// haproxyLine is one request of haproxy's log (log-format in haproxy.go).
type haproxyLine struct {
	client, server string
	status         int
	term           string // termination state, 4 characters, e.g. "SH--"
	retries        int    // %rc, "+" (redispatched) dropped
}

// parseHAProxyLine reads "l7req client server status term retries "request"";
// ok is false for lines that are not request logs (haproxy's own warnings
// share the output).
func parseHAProxyLine(line string) (l haproxyLine, ok bool, err error) {
	rest, found := strings.CutPrefix(line, "l7req ")
	if !found {
		return l, false, nil
	}
	f := strings.Fields(rest)
	if len(f) < 5 {
		return l, false, fmt.Errorf("haproxy log line %q: want client, server, status, state, retries, request", line)
	}
	l.client, l.server, l.term = f[0], f[1], f[3]
	if l.status, err = strconv.Atoi(f[2]); err != nil {
		return l, false, fmt.Errorf("haproxy log line %q: status: %w", line, err)
	}
	if l.retries, err = strconv.Atoi(strings.TrimPrefix(f[4], "+")); err != nil {
		return l, false, fmt.Errorf("haproxy log line %q: retries: %w", line, err)
	}
	return l, true, nil
}

// count adds the line to c. The first two characters of the termination
// state say who ended the session and in which phase: S (server) with H
// (waiting for headers) or D (data) is an upstream abort; SC a connect the
// server "or an equipment between it and haproxy explicitly refused" (its
// docs): a RST or an ICMP unreachable alike, counted Refused; sC a connect
// timeout, counted Blackholed. Debian's haproxy 2.6 logs a connect refused
// and one a router's ICMP host unreachable ended the same ("503 SC--", and
// %[bc_err] is empty for both), so its Refused holds connects to a gone
// network too (Kind.SeparatesUnreachable). A line is a request, not a
// connect: with retries (%rc) a request's earlier failed connects are not
// counted.
func (l haproxyLine) count(c *Counts) {
	c.Requests++
	c.Status[l.status]++
	if l.retries > 0 {
		c.Retried++
	}
	c.backend(l.server, func(b *Backend) {
		b.Attempts++
		switch l.status {
		case 502:
			b.BadGateway++
		case 503:
			b.Unavailable++
		}
		switch {
		case strings.HasPrefix(l.term, "SH"), strings.HasPrefix(l.term, "SD"):
			b.Aborted++
		case strings.HasPrefix(l.term, "SC"):
			b.Refused++
		case strings.HasPrefix(l.term, "sC"):
			b.Blackholed++
		}
	})
}

func parseHAProxyLog(path string) (Counts, error) {
	c := newCounts()
	err := eachLine(path, func(line string) error {
		l, ok, err := parseHAProxyLine(line)
		if ok {
			l.count(&c)
		}
		return err
	})
	return c, err
}

// ParseHAProxyLog reads a log of haproxy's written with the log-format of
// this package's config ("l7req client server status term retries
// request"): a sidecar's in the lab, as the L7 proxy's here.
func ParseHAProxyLog(path string) (Counts, error) { return parseHAProxyLog(path) }
