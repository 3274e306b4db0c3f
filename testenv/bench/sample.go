package bench

import (
	"context"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"

	"github.com/drainwatch/drainwatch/testenv/lab"
)

// Mode is what runs beside the server during a measurement.
type Mode string

// The modes, in the order the table prints them.
const (
	ModeOff         Mode = "no drainwatch"
	ModeIdle        Mode = "nothing watched" // drainwatch of the other node: its probes run, the pod is not its
	ModeWatched     Mode = "pod watched"
	ModeTerminating Mode = "pod terminating" // deleted, serving through its preStop
)

// Modes lists every mode.
var Modes = []Mode{ModeOff, ModeIdle, ModeWatched, ModeTerminating}

// Sample is one wrk run and what it cost, as counted by the kernel.
type Sample struct {
	Round       int
	Mode        Mode
	Load        string        // "close" or "keep-alive"
	Requests    uint64        // completed, as wrk counts them
	Connections uint64        // accepted by the server's network namespace (Tcp PassiveOpens)
	Errors      uint64        // wrk's socket errors and non-2xx responses
	Elapsed     time.Duration // wrk's own measure of the run
	ServerCPU   time.Duration // the nginx pod's cgroup
	DaemonCPU   time.Duration // drainwatch's process, 10 ms resolution; 0 without drainwatch
	ClientCPU   time.Duration // wrk's process (softirq work of both ends often lands here)
}

// Throughput is requests per second.
func (s Sample) Throughput() float64 { return float64(s.Requests) / s.Elapsed.Seconds() }

// counters is a snapshot of the cumulative counts a Sample is a delta of.
type counters struct {
	server, daemon time.Duration
	accepts        uint64
}

func snapshot(srv server, d *lab.Daemon) (counters, error) {
	var c counters
	var err error
	if c.server, err = cgroupCPU(srv.cgroup); err != nil {
		return c, err
	}
	if c.accepts, err = passiveOpens(srv.pid); err != nil {
		return c, err
	}
	if d != nil {
		c.daemon, err = processCPU(d.PID())
	}
	return c, err
}

// measure runs one load against srv and returns its Sample.
func measure(ctx context.Context, fabric *netlab.NS, srv server, d *lab.Daemon, l Load) (Sample, error) {
	before, err := snapshot(srv, d)
	if err != nil {
		return Sample{}, err
	}
	w, err := runWrk(ctx, fabric, srv.url(), l)
	if err != nil {
		return Sample{}, err
	}
	after, err := snapshot(srv, d)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Load: l.name(), Requests: w.Requests, Connections: after.accepts - before.accepts,
		Errors: w.Errors, Elapsed: w.Elapsed, ServerCPU: after.server - before.server,
		DaemonCPU: after.daemon - before.daemon, ClientCPU: w.CPU}, nil
}
