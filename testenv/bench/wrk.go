package bench

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// Load is one wrk run's shape.
type Load struct {
	Close       bool          // send "Connection: close": one connection per request
	Duration    time.Duration // wrk -d: bounds the run in time
	Connections int           // wrk -c
	Threads     int           // wrk -t
}

func (l Load) name() string {
	if l.Close {
		return "close"
	}
	return "keep-alive"
}

// wrkResult is what one wrk run did and cost its own process.
type wrkResult struct {
	Requests uint64
	Errors   uint64 // socket errors and non-2xx/3xx responses
	Elapsed  time.Duration
	CPU      time.Duration // wrk's own user+system time (softirq work lands here too)
}

// runWrk runs Debian's wrk inside the fabric namespace against url, a pod
// address of this testenv only. wrk stops itself after l.Duration; the
// context bounds it once more.
func runWrk(ctx context.Context, fabric *netlab.NS, url string, l Load) (wrkResult, error) {
	ctx, cancel := context.WithTimeout(ctx, l.Duration+30*time.Second)
	defer cancel()
	args := []string{"-t", strconv.Itoa(l.Threads), "-c", strconv.Itoa(l.Connections),
		"-d", fmt.Sprintf("%ds", max(1, int(l.Duration.Seconds()))), "--timeout", "2s"} // wrk takes whole units
	if l.Close {
		args = append(args, "-H", "Connection: close")
	}
	cmd := fabric.Command("wrk", append(args, url)...)
	out, err := commandOutput(ctx, cmd)
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %v: %w: %s", args, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return r, err
	}
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, nil
}

var (
	wrkTotal  = regexp.MustCompile(`(\d+) requests in ([0-9.]+)(us|ms|s|m),`)
	wrkSocket = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// parseWrk reads wrk's summary: "123 requests in 5.00s, 1.2MB read" and
// the optional error lines.
func parseWrk(out string) (wrkResult, error) {
	m := wrkTotal.FindStringSubmatch(out)
	if m == nil {
		return wrkResult{}, fmt.Errorf("wrk printed no request count: %s", out)
	}
	var r wrkResult
	r.Requests, _ = strconv.ParseUint(m[1], 10, 64)
	d, err := time.ParseDuration(m[2] + m[3])
	if err != nil {
		return r, fmt.Errorf("wrk's elapsed time %q: %w", m[2]+m[3], err)
	}
	r.Elapsed = d
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseUint(s, 10, 64)
			r.Errors += n
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		r.Errors += n
	}
	if strings.TrimSpace(out) == "" {
		return r, fmt.Errorf("wrk printed nothing")
	}
	return r, nil
}

// commandOutput runs cmd and returns its stdout and stderr, killing it when
// ctx ends first.
func commandOutput(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.Bytes(), err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return buf.Bytes(), ctx.Err()
	}
}
