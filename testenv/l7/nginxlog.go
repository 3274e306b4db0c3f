package l7

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// nginxAccess matches the l7 log_format in nginx.go.
var nginxAccess = regexp.MustCompile(`^l7req (\S+) (\d+) "([^"]*)" "([^"]*)" `)

// nginxUpstream finds the upstream an error log line is about.
var nginxUpstream = regexp.MustCompile(`upstream: "[a-z]+://([^/"]+)`)

// parseNginxLogs counts the access log (one line per client request; the
// upstreams tried and their statuses, comma-separated when nginx retried)
// and the error log (why an upstream attempt failed).
func parseNginxLogs(access, errorLog string) (Counts, error) {
	c := newCounts()
	if err := eachLine(access, func(line string) error { return countNginxAccess(&c, line) }); err != nil {
		return c, err
	}
	err := eachLine(errorLog, func(line string) error { countNginxError(&c, line); return nil })
	return c, err
}

func countNginxAccess(c *Counts, line string) error {
	m := nginxAccess.FindStringSubmatch(line)
	if m == nil {
		return fmt.Errorf("nginx access log line %q does not match the l7 format", line)
	}
	status, _ := strconv.Atoi(m[2])
	c.Requests++
	c.Status[status]++
	addrs, statuses := splitList(m[3]), splitList(m[4])
	if len(addrs) > 1 {
		c.Retried++
	}
	for i, a := range addrs {
		st := ""
		if i < len(statuses) {
			st = statuses[i]
		}
		c.backend(a, func(b *Backend) {
			b.Attempts++
			switch st {
			case "502":
				b.BadGateway++
			case "503":
				b.Unavailable++
			}
		})
	}
	return nil
}

// splitList splits $upstream_addr or $upstream_status at the ", " between
// the servers tried.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}

// countNginxError counts the [error] lines about an upstream attempt, and
// the requests answered 502 with no upstream to try.
func countNginxError(c *Counts, line string) {
	if !strings.Contains(line, "[error]") {
		return
	}
	if strings.Contains(line, "no live upstreams while connecting to upstream") {
		c.NoLiveUpstreams++
		return
	}
	m := nginxUpstream.FindStringSubmatch(line)
	if m == nil {
		return
	}
	c.backend(m[1], func(b *Backend) {
		switch {
		case strings.Contains(line, "upstream prematurely closed connection"):
			b.Aborted++
		case strings.Contains(line, "(104: Connection reset by peer)"):
			b.Aborted++
			b.Reset++
		case strings.Contains(line, "while connecting to upstream"):
			countNginxConnect(b, line)
		}
	})
}

// countNginxConnect counts a failed connect by the errno nginx logs with
// it: a RST refused it (111); no answer (110: nginx's proxy_connect_timeout,
// "upstream timed out (110: ...)", or the kernel's SYN retries) or an ICMP
// unreachable (113: a router's neighbour resolution failed; 101: no route)
// means the server's network was gone. nginx writes "connect() failed
// (errno)" for a connect that failed later, "connect() to ip:port failed
// (errno)" for one connect(2) failed at once (measured with Debian's nginx
// 1.22: 101 fails at once, 111 and 113 later).
func countNginxConnect(b *Backend, line string) {
	switch {
	case strings.Contains(line, "(111: Connection refused)"):
		b.Refused++
	case strings.Contains(line, "(110: Connection timed out)"), strings.Contains(line, "(113: No route to host)"),
		strings.Contains(line, "(101: Network is unreachable)"):
		b.Blackholed++
	}
}
