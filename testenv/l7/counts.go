package l7

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
)

// Counts is what a proxy's own logs say about the requests it handled.
type Counts struct {
	Requests int         // client requests logged
	Status   map[int]int // status answered to the client → requests
	// Retried counts requests the proxy sent again after a failed attempt
	// (haproxy's retries field %rc; nginx: more than one $upstream_addr).
	Retried int
	// NoLiveUpstreams counts requests nginx answered 502 without trying a
	// server, every server of the upstream being disabled: its passive
	// health check (max_fails=1, fail_timeout=10s by default) disables a
	// server for 10 s after one failed attempt, a reset on a reused
	// connection included, so one reset can turn into several 502s.
	// testenv's nginx sets max_fails=0, as ingress-nginx does (it balances
	// in Lua and disables no server this way): 0 unless that changes.
	NoLiveUpstreams int
	Backends        map[string]Backend // per upstream "ip:port"
}

// Backend is one upstream's record in a proxy's logs.
type Backend struct {
	// Attempts counts requests sent or tried to it, retries included.
	Attempts int
	// BadGateway and Unavailable count attempts that ended 502 and 503
	// (haproxy: the status logged; nginx: $upstream_status, which is 502
	// for a failed attempt even when a retry answered the client).
	BadGateway, Unavailable int
	// Aborted counts attempts the upstream ended before the response was
	// complete, on a connection that was established: haproxy termination
	// state SH or SD, nginx "upstream prematurely closed connection" or
	// "Connection reset by peer" in its error log. The keep-alive race ends
	// here.
	Aborted int
	// Reset is the part of Aborted nginx reports as a reset (ECONNRESET);
	// haproxy's log does not tell a reset from a close.
	Reset int
	// Refused counts connects answered with a RST (nginx "(111: Connection
	// refused)"; haproxy SC, which an ICMP unreachable ends in too: see
	// Kind.SeparatesUnreachable).
	Refused int
	// Blackholed counts connects that got no answer or an ICMP unreachable,
	// the network of the server gone (nginx "(113: No route to host)",
	// "(101: Network is unreachable)", "(110: Connection timed out)" while
	// connecting; haproxy sC, its connect timeout).
	Blackholed int
}

// SeparatesUnreachable reports whether the proxy's log tells a connect
// refused (a RST) from one an ICMP unreachable ended: nginx logs the errno,
// haproxy logs both SC (see haproxylog.go). Where it cannot, only the sum
// of Refused and Blackholed is a count of the proxy's own.
func (k Kind) SeparatesUnreachable() bool { return k == Nginx }

// Sum adds up the records of the backends addrs ("ip:port").
func (c Counts) Sum(addrs ...string) Backend {
	var s Backend
	for _, a := range addrs {
		b := c.Backends[a]
		s.Attempts += b.Attempts
		s.BadGateway += b.BadGateway
		s.Unavailable += b.Unavailable
		s.Aborted += b.Aborted
		s.Reset += b.Reset
		s.Refused += b.Refused
		s.Blackholed += b.Blackholed
	}
	return s
}

// BadGateway sums Backend.BadGateway over all backends.
func (c Counts) BadGateway() int {
	n := 0
	for _, b := range c.Backends {
		n += b.BadGateway
	}
	return n
}

// Aborted sums Backend.Aborted over all backends.
func (c Counts) Aborted() int {
	n := 0
	for _, b := range c.Backends {
		n += b.Aborted
	}
	return n
}

func newCounts() Counts {
	return Counts{Status: map[int]int{}, Backends: map[string]Backend{}}
}

// backend applies fn to the record of addr when it is an "ip:port".
func (c Counts) backend(addr string, fn func(*Backend)) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return // "-", <NOSRV>: no upstream was chosen
	}
	b := c.Backends[addr]
	fn(&b)
	c.Backends[addr] = b
}

// eachLine calls fn on every line of path.
func eachLine(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("proxy log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if err := fn(sc.Text()); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return sc.Err()
}
