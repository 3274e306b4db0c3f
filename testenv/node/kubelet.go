package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/drainwatch/drainwatch/testenv/node/kubeletprobe"
	"github.com/rs/zerolog"
)

// ProbeCount is what the kubelet prober saw of one "ip:port": attempts,
// accepted, refused (ECONNREFUSED) and other errors.
type ProbeCount = kubeletprobe.Count

// ProbeAttempt is one connection attempt of the kubelet prober.
type ProbeAttempt = kubeletprobe.Attempt

// errProberGone fails probes once the prober process has exited.
var errProberGone = errors.New("kubelet prober process is gone")

// kubeletProber is the agent's end of the prober process: it sends
// requests and hands each response to the goroutine waiting for its ID.
type kubeletProber struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	log    zerolog.Logger
	exited chan struct{} // closed when the response stream ended

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan kubeletprobe.Response
	final   *kubeletprobe.Response // the counts taken when the agent stopped
}

// startKubeletProber runs bin (a file named "kubelet") in the node's network
// namespace; it dies with the agent's process (Pdeathsig).
func (a *Agent) startKubeletProber(bin string) (*kubeletProber, error) {
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("kubelet prober stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("kubelet prober stdout: %w", err)
	}
	if err := a.nodeNS.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting kubelet prober %s: %w", bin, err)
	}
	p := &kubeletProber{cmd: cmd, stdin: stdin, log: a.log, exited: make(chan struct{}),
		waiting: map[uint64]chan kubeletprobe.Response{}}
	go p.read(stdout)
	return p, nil
}

// read dispatches responses until the process's stdout ends, then fails
// every request still waiting.
func (p *kubeletProber) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // a counts answer carries the whole log
	for sc.Scan() {
		var resp kubeletprobe.Response
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
			p.log.Error().Err(err).Msg("decoding a kubelet prober response")
			continue
		}
		p.mu.Lock()
		ch := p.waiting[resp.ID]
		delete(p.waiting, resp.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
	p.mu.Lock()
	close(p.exited)
	p.waiting = nil
	p.mu.Unlock()
}

// call sends req and waits for its response, or for ctx.
func (p *kubeletProber) call(ctx context.Context, req kubeletprobe.Request) (kubeletprobe.Response, error) {
	ch := make(chan kubeletprobe.Response, 1)
	p.mu.Lock()
	if p.waiting == nil {
		p.mu.Unlock()
		return kubeletprobe.Response{}, errProberGone
	}
	p.next++
	req.ID = p.next
	p.waiting[req.ID] = ch
	line, _ := json.Marshal(req)
	_, err := p.stdin.Write(append(line, '\n'))
	p.mu.Unlock()
	if err != nil {
		return kubeletprobe.Response{}, fmt.Errorf("sending to the kubelet prober: %w", err)
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-p.exited:
		return kubeletprobe.Response{}, errProberGone
	case <-ctx.Done():
		return kubeletprobe.Response{}, ctx.Err()
	}
}

// counts returns the prober's tally, or the one taken when it stopped.
func (p *kubeletProber) counts(ctx context.Context) (kubeletprobe.Response, error) {
	p.mu.Lock()
	final := p.final
	p.mu.Unlock()
	if final != nil {
		return *final, nil
	}
	return p.call(ctx, kubeletprobe.Request{Op: kubeletprobe.OpCounts})
}

// stop keeps the final counts, then closes stdin (the prober finishes the
// probes in flight and exits) and waits; it kills the process if it lingers.
func (p *kubeletProber) stop() {
	if resp, err := p.counts(context.Background()); err == nil {
		p.mu.Lock()
		p.final = &resp
		p.mu.Unlock()
	} else {
		p.log.Warn().Err(err).Msg("kubelet prober counts at stop")
	}
	_ = p.stdin.Close()
	<-p.exited
	_ = p.cmd.Wait()
}

// ProbeCounts returns the kubelet prober's counts per target "ip:port" of
// every tcpSocket and httpGet probe connection this node made (after Stop:
// the counts it stopped with). Pod IPs are reused: filter ProbeAttempts by
// Pod to tell pods apart.
func (a *Agent) ProbeCounts() (map[string]ProbeCount, error) {
	resp, err := a.kubelet.counts(context.Background())
	return resp.Counts, err
}

// ProbeAttempts returns the kubelet prober's log of connection attempts, in
// the order they finished (the newest kubeletprobe.MaxLog).
func (a *Agent) ProbeAttempts() ([]ProbeAttempt, error) {
	attempts, _, err := a.ProbeLog()
	return attempts, err
}

// ProbeLog is ProbeAttempts and how many of the oldest attempts the log
// dropped to keep its bound.
func (a *Agent) ProbeLog() ([]ProbeAttempt, int, error) {
	resp, err := a.kubelet.counts(context.Background())
	return resp.Log, resp.LogDropped, err
}

// ProberPID is the PID of the kubelet prober process: /proc/<pid>/comm
// reads "kubelet".
func (a *Agent) ProberPID() int { return a.kubelet.cmd.Process.Pid }
