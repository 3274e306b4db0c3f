// Package otelcol runs a real OpenTelemetry Collector for the tests: the
// minimal distribution of testenv/otelcolbuild (the core OTLP receiver and
// the contrib file exporter, built by `make otelcol` into .cache/), on
// loopback only. It receives OTLP logs over gRPC and HTTP and writes every
// request it accepts as one JSON line to <dir>/logs.jsonl, which Logs reads
// back as a flat list of records.
//
// The collector is a child process that dies with its parent; its config
// (<dir>/otelcol.yaml) and its own log (<dir>/otelcol.log) stay in dir.
// Restart stops it and starts it again on the same ports, for tests of an
// exporter that must ride out a collector outage.
package otelcol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
)

// Version is the collector release testenv/otelcolbuild pins (its go.mod);
// the Makefile's otelcol target builds into .cache/otelcol-<Version>/.
const Version = "v0.161.0"

// BinaryEnv names the environment variable that overrides the binary's path.
const BinaryEnv = "DRAINWATCH_OTELCOL"

const (
	startTimeout = 30 * time.Second // the binary running to both ports accepting
	stopGrace    = 10 * time.Second // SIGTERM to SIGKILL
	// FlushInterval is the file exporter's: a record the collector accepted
	// is in logs.jsonl at most this long after (plus a write).
	FlushInterval = 100 * time.Millisecond
)

// Binary returns the collector binary: $DRAINWATCH_OTELCOL, else
// <repo root>/.cache/otelcol-<Version>/otelcol. It fails with the command to
// run when the binary is missing.
func Binary() (string, error) {
	path := os.Getenv(BinaryEnv)
	if path == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return "", fmt.Errorf("locating the otelcol binary (set %s): %w", BinaryEnv, err)
		}
		path = filepath.Join(root, ".cache", "otelcol-"+Version, "otelcol")
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("OpenTelemetry Collector binary %s missing: run make otelcol (or set %s)", path, BinaryEnv)
	}
	return path, nil
}

// Collector is a running collector.
type Collector struct {
	// Dir holds the config, the collector's log and logs.jsonl.
	Dir string

	bin      string
	config   string
	logsPath string
	grpcAddr string
	httpAddr string
	log      zerolog.Logger

	mu   sync.Mutex
	proc *process // nil once stopped
}

// Start writes the collector's config into dir (created if missing), runs
// the collector and returns once its gRPC and HTTP receivers both accept
// connections. The logger is zerolog.Ctx(ctx). Ports are picked free on
// 127.0.0.1 and then bound by the collector; when another process takes one
// in between, Start tries again with new ports, up to three times.
func Start(ctx context.Context, dir string) (*Collector, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the collector's dir: %w", err)
	}
	c := &Collector{
		Dir:      dir,
		bin:      bin,
		config:   filepath.Join(dir, "otelcol.yaml"),
		logsPath: filepath.Join(dir, "logs.jsonl"),
		log:      zerolog.Ctx(ctx).With().Str("component", "otelcol").Logger(),
	}
	for attempt := 1; ; attempt++ {
		if err = c.pickPorts(); err != nil {
			return nil, err
		}
		if err = c.writeConfig(); err != nil {
			return nil, err
		}
		if err = c.start(ctx); err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return nil, err
		}
		c.log.Warn().Err(err).Int("attempt", attempt).Msg("a port was taken; starting again")
	}
	c.log.Info().Str("grpc", c.grpcAddr).Str("http", c.httpAddr).Str("logs", c.logsPath).Msg("collector ready")
	return c, nil
}

// GRPCAddr is the OTLP/gRPC receiver's host:port (plaintext).
func (c *Collector) GRPCAddr() string { return c.grpcAddr }

// HTTPAddr is the OTLP/HTTP receiver's host:port (plaintext; logs are
// posted to http://<HTTPAddr>/v1/logs).
func (c *Collector) HTTPAddr() string { return c.httpAddr }

// LogsPath is the file exporter's output: one JSON ExportLogsServiceRequest
// a line.
func (c *Collector) LogsPath() string { return c.logsPath }

// Stop sends SIGTERM (the collector drains its pipeline and flushes the
// file), SIGKILL after 10 s, and waits for the exit. It fails when the
// collector had to be killed or exited with an error. Calling it twice is
// fine.
func (c *Collector) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *Collector) stopLocked() error {
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	err := p.stop(stopGrace)
	c.log.Debug().Err(err).Msg("stopped")
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, p.logPath)
	}
	return nil
}

// Restart stops the collector (when it runs) and starts it again with the
// same config, so on the same ports, and returns once both receivers accept
// again. For an outage of some length, call Stop first and Restart when the
// outage should end. Records written before stay in logs.jsonl (the
// exporter appends).
func (c *Collector) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.stopLocked(); err != nil {
		return err
	}
	return c.startLocked(ctx)
}

func (c *Collector) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startLocked(ctx)
}

func (c *Collector) startLocked(ctx context.Context) error {
	p, err := startProcess(c.bin, c.Dir, "--config", c.config)
	if err != nil {
		return err
	}
	c.log.Debug().Int("pid", p.cmd.Process.Pid).Str("log", p.logPath).Msg("started")
	if err := waitListening(ctx, p, c.grpcAddr, c.httpAddr); err != nil {
		_ = p.stop(0)
		return err
	}
	c.proc = p
	return nil
}

// pickPorts chooses two free ports on 127.0.0.1.
func (c *Collector) pickPorts() error {
	var ports [2]string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("picking a free port: %w", err)
		}
		defer l.Close() // both held open until both are picked: never the same port twice
		ports[i] = l.Addr().String()
	}
	c.grpcAddr, c.httpAddr = ports[0], ports[1]
	return nil
}

// writeConfig writes the collector's config: the OTLP receiver on loopback,
// the file exporter appending JSON lines, and no internal metrics, so the
// collector binds nothing but the two receivers' ports.
func (c *Collector) writeConfig() error {
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    format: json
    append: true
    flush_interval: %s
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: info
      encoding: console
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file]
`, c.grpcAddr, c.httpAddr, strconv.Quote(c.logsPath), FlushInterval)
	if err := os.WriteFile(c.config, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("writing the collector's config: %w", err)
	}
	return nil
}

// errPortTaken marks a collector that exited because its port was taken.
var errPortTaken = errors.New("port already in use")

// waitListening polls both addresses every 50 ms until they accept a TCP
// connection, the collector exits, or the start timeout passes.
func waitListening(ctx context.Context, p *process, addrs ...string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if done, err := p.exited(); done {
			if b, _ := os.ReadFile(p.logPath); bytes.Contains(b, []byte("address already in use")) {
				return fmt.Errorf("%w: %w (see %s)", errPortTaken, err, p.logPath)
			}
			return fmt.Errorf("%w (see %s)", err, p.logPath)
		}
		if allAccept(ctx, addrs) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the collector to listen on %v (see %s): %w", addrs, p.logPath, ctx.Err())
		case <-tick.C:
		}
	}
}

func allAccept(ctx context.Context, addrs []string) bool {
	d := net.Dialer{Timeout: time.Second}
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return false
		}
		conn.Close()
	}
	return true
}

// process is the collector running as a child process, its output appended
// to <dir>/otelcol.log. It dies with its parent (Pdeathsig), so a crashed
// test leaves nothing behind.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func startProcess(bin, dir string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, "otelcol.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the collector's log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// Pdeathsig is per forking thread: fork from controlplane's keeper.
	if err := controlplane.StartFromKeeper(cmd); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with its error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("otelcol exited: %v", p.err)
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after grace (at once when grace is 0),
// and waits for the exit. It reports an exit other than a clean one after
// SIGTERM.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return fmt.Errorf("otelcol had exited before it was stopped: %v", p.err)
	default:
	}
	if grace == 0 {
		_ = p.cmd.Process.Kill()
		<-p.done
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling otelcol: %w", err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("otelcol exited after SIGTERM: %w", p.err)
		}
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("otelcol did not exit within %s of SIGTERM: killed", grace)
}

// Log is one log record the collector received, flattened with its
// resource's and scope's fields. Attribute values are string, int64,
// float64, bool, []byte, []any (an array) or map[string]any (a kvlist).
type Log struct {
	Resource   map[string]any
	Scope      string // the instrumentation scope's name
	Attributes map[string]any
	// Body is a string body as is; any other body as the JSON of its value
	// (BodyValue holds the value itself).
	Body           string
	BodyValue      any
	EventName      string
	SeverityText   string
	SeverityNumber int
	Time           time.Time // zero when the record had no timeUnixNano
	ObservedTime   time.Time
	TraceID        string // hex, as OTLP/JSON writes it
	SpanID         string
}

// Logs reads every log record the collector has written so far, in the
// order it received them. A record reaches the file within FlushInterval of
// being accepted (WaitLogs polls); a line the collector is still writing is
// left for the next call.
func (c *Collector) Logs() ([]Log, error) {
	b, err := os.ReadFile(c.logsPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the collector's logs: %w", err)
	}
	return ParseLogs(b, c.logsPath)
}

// WaitLogs polls Logs every 50 ms until it returns at least n records or ctx
// ends (bounded to a minute in any case), and returns what it read last.
func (c *Collector) WaitLogs(ctx context.Context, n int) ([]Log, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		logs, err := c.Logs()
		if err != nil || len(logs) >= n {
			return logs, err
		}
		select {
		case <-ctx.Done():
			return logs, fmt.Errorf("waiting for %d log records in %s (have %d): %w", n, c.logsPath, len(logs), ctx.Err())
		case <-tick.C:
		}
	}
}

// ParseLogs parses the file exporter's JSON lines (each an OTLP/JSON
// ExportLogsServiceRequest) into flat records; name labels errors. A last
// line without its newline is still being written and is skipped.
func ParseLogs(b []byte, name string) ([]Log, error) {
	var logs []Log
	for lineNo := 1; len(b) > 0; lineNo++ {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSpace(b[:i])
		b = b[i+1:]
		if len(line) == 0 {
			continue
		}
		var req exportLogsRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		for _, rl := range req.ResourceLogs {
			resource, err := kvMap(rl.Resource.Attributes)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: resource: %w", name, lineNo, err)
			}
			for _, sl := range rl.ScopeLogs {
				for _, r := range sl.LogRecords {
					l, err := r.flatten(resource, sl.Scope.Name)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: %w", name, lineNo, err)
					}
					logs = append(logs, l)
				}
			}
		}
	}
	return logs, nil
}

// The OTLP/JSON encoding of an ExportLogsServiceRequest, as far as Log needs
// it (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).
type exportLogsRequest struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes []keyValue `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			LogRecords []logRecord `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type logRecord struct {
	TimeUnixNano         protoInt   `json:"timeUnixNano"`
	ObservedTimeUnixNano protoInt   `json:"observedTimeUnixNano"`
	SeverityNumber       int        `json:"severityNumber"`
	SeverityText         string     `json:"severityText"`
	Body                 anyValue   `json:"body"`
	Attributes           []keyValue `json:"attributes"`
	TraceID              string     `json:"traceId"`
	SpanID               string     `json:"spanId"`
	EventName            string     `json:"eventName"`
}

func (r logRecord) flatten(resource map[string]any, scope string) (Log, error) {
	attrs, err := kvMap(r.Attributes)
	if err != nil {
		return Log{}, fmt.Errorf("attributes: %w", err)
	}
	body, err := r.Body.value()
	if err != nil {
		return Log{}, fmt.Errorf("body: %w", err)
	}
	l := Log{
		Resource: resource, Scope: scope, Attributes: attrs, BodyValue: body,
		EventName: r.EventName, SeverityText: r.SeverityText, SeverityNumber: r.SeverityNumber,
		Time: unixNano(r.TimeUnixNano), ObservedTime: unixNano(r.ObservedTimeUnixNano),
		TraceID: r.TraceID, SpanID: r.SpanID,
	}
	switch v := body.(type) {
	case nil:
	case string:
		l.Body = v
	default:
		j, err := json.Marshal(v)
		if err != nil {
			return Log{}, fmt.Errorf("body: %w", err)
		}
		l.Body = string(j)
	}
	return l, nil
}

func unixNano(n protoInt) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

type anyValue struct {
	StringValue *string    `json:"stringValue"`
	IntValue    *protoInt  `json:"intValue"`
	DoubleValue *protoReal `json:"doubleValue"`
	BoolValue   *bool      `json:"boolValue"`
	BytesValue  *[]byte    `json:"bytesValue"` // base64, as encoding/json decodes []byte
	ArrayValue  *struct {
		Values []anyValue `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []keyValue `json:"values"`
	} `json:"kvlistValue"`
}

// value is the Go value of v; nil for an empty value.
func (v anyValue) value() (any, error) {
	switch {
	case v.StringValue != nil:
		return *v.StringValue, nil
	case v.IntValue != nil:
		return int64(*v.IntValue), nil
	case v.DoubleValue != nil:
		return float64(*v.DoubleValue), nil
	case v.BoolValue != nil:
		return *v.BoolValue, nil
	case v.BytesValue != nil:
		return *v.BytesValue, nil
	case v.ArrayValue != nil:
		out := make([]any, 0, len(v.ArrayValue.Values))
		for i, e := range v.ArrayValue.Values {
			x, err := e.value()
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, x)
		}
		return out, nil
	case v.KvlistValue != nil:
		return kvMap(v.KvlistValue.Values)
	}
	return nil, nil
}

func kvMap(kvs []keyValue) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.value()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		m[kv.Key] = v
	}
	return m, nil
}

// protoInt is a 64-bit integer in OTLP/JSON: a decimal string, or a number.
type protoInt int64

func (p *protoInt) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(string(bytes.Trim(b, `"`)), 10, 64)
	if err != nil {
		return fmt.Errorf("integer %s: %w", b, err)
	}
	*p = protoInt(n)
	return nil
}

// protoReal is a double in OTLP/JSON: a number, or "NaN", "Infinity",
// "-Infinity" (or a number as a string).
type protoReal float64

func (p *protoReal) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	switch s {
	case "NaN":
		*p = protoReal(math.NaN())
		return nil
	case "Infinity":
		*p = protoReal(math.Inf(1))
		return nil
	case "-Infinity":
		*p = protoReal(math.Inf(-1))
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("double %s: %w", b, err)
	}
	*p = protoReal(f)
	return nil
}
