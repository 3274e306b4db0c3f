package otelcol

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// start runs the real collector (make otelcol builds it; a missing binary
// fails the test with that hint) and stops it at the end of the test.
func start(t *testing.T) (context.Context, *Collector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ctx = zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger().WithContext(ctx)
	// The SDK reports a failed export only to the global handler: show it,
	// rather than only a WaitLogs timeout.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		fmt.Fprintf(os.Stderr, "otel SDK error: %v\n", err)
	}))
	c, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the collector: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(c.Dir, "otelcol.log"))
			t.Logf("otelcol.log:\n%s", b)
		}
	})
	return ctx, c
}

// sent is what emit sends, in the form Logs returns it.
type sent struct {
	service, body, event string
	time                 time.Time
	attrs                map[string]any
}

// emit sends one record through the OpenTelemetry Go SDK's OTLP exporter
// (otlploggrpc or otlploghttp), with its own resource, and flushes it.
func emit(ctx context.Context, t *testing.T, exp sdklog.Exporter, s sent) {
	t.Helper()
	lp := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewSchemaless(
			attribute.String("service.name", s.service),
			attribute.String("host.name", "node-a"),
		)),
		sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)),
	)
	var r otellog.Record
	r.SetTimestamp(s.time)
	r.SetObservedTimestamp(s.time)
	r.SetBody(attribute.StringValue(s.body))
	r.SetEventName(s.event)
	r.SetSeverity(otellog.SeverityWarn)
	r.SetSeverityText("WARN")
	for k, v := range s.attrs {
		switch v := v.(type) {
		case string:
			r.AddAttributes(attribute.String(k, v))
		case int64:
			r.AddAttributes(attribute.Int64(k, v))
		case float64:
			r.AddAttributes(attribute.Float64(k, v))
		case bool:
			r.AddAttributes(attribute.Bool(k, v))
		case []any:
			vals := make([]string, len(v))
			for i, e := range v {
				vals[i] = e.(string)
			}
			r.AddAttributes(attribute.StringSlice(k, vals))
		default:
			t.Fatalf("attribute %s: unsupported %T", k, v)
		}
	}
	lp.Logger("drainwatch.test").Emit(ctx, r)
	if err := lp.Shutdown(ctx); err != nil { // the simple processor exported synchronously; this shuts the exporter
		t.Fatalf("shutting the logger provider: %v", err)
	}
}

func grpcExporter(ctx context.Context, t *testing.T, c *Collector) sdklog.Exporter {
	t.Helper()
	exp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(c.GRPCAddr()), otlploggrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func httpExporter(ctx context.Context, t *testing.T, c *Collector) sdklog.Exporter {
	t.Helper()
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(c.HTTPAddr()), otlploghttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func want(s sent) Log {
	return Log{
		Resource:       map[string]any{"service.name": s.service, "host.name": "node-a"},
		Scope:          "drainwatch.test",
		Attributes:     s.attrs,
		Body:           s.body,
		BodyValue:      s.body,
		EventName:      s.event,
		SeverityText:   "WARN",
		SeverityNumber: int(otellog.SeverityWarn),
		Time:           s.time,
		ObservedTime:   s.time,
	}
}

// TestReceivesOverGRPCAndHTTP sends one record over each protocol and reads
// exactly those two back, with their resources and attributes.
func TestReceivesOverGRPCAndHTTP(t *testing.T) {
	ctx, c := start(t)
	for _, a := range []string{c.GRPCAddr(), c.HTTPAddr()} {
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Errorf("receiver address %s is not on 127.0.0.1", a)
		}
	}
	assertListensOnLoopbackOnly(t, c)

	base := time.Date(2026, 5, 4, 3, 2, 1, 123456789, time.UTC)
	viaGRPC := sent{
		service: "drainwatch-grpc", body: "pod drained over grpc", event: "drainwatch.drain", time: base,
		attrs: map[string]any{
			"k8s.namespace.name": "shop", "drain.pods": int64(3), "drain.seconds": 12.5,
			"drain.complete": true, "drain.nodes": []any{"node-a", "node-b"},
		},
	}
	viaHTTP := sent{
		service: "drainwatch-http", body: "pod drained over http", event: "drainwatch.evict", time: base.Add(time.Second),
		attrs: map[string]any{"k8s.pod.name": "web-0", "drain.pods": int64(-1), "drain.complete": false},
	}
	emit(ctx, t, grpcExporter(ctx, t, c), viaGRPC)
	emit(ctx, t, httpExporter(ctx, t, c), viaHTTP)

	got, err := c.WaitLogs(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Both were acknowledged before WaitLogs; give a stray duplicate one
	// more flush to show up.
	time.Sleep(3 * FlushInterval)
	if got, err = c.Logs(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Log{want(viaGRPC), want(viaHTTP)}, got); diff != "" {
		t.Errorf("Logs() (-want +got):\n%s", diff)
	}
}

// TestRestartKeepsPortsAndRecords stops the collector, checks that nothing
// is received while it is down, starts it again on the same ports and reads
// the records of both runs.
func TestRestartKeepsPortsAndRecords(t *testing.T) {
	ctx, c := start(t)
	grpcAddr, httpAddr := c.GRPCAddr(), c.HTTPAddr()
	first := sent{service: "before", body: "before the outage", event: "e", time: time.Unix(1_700_000_000, 0).UTC(), attrs: map[string]any{"n": int64(1)}}
	emit(ctx, t, grpcExporter(ctx, t, c), first)
	if _, err := c.WaitLogs(ctx, 1); err != nil {
		t.Fatal(err)
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{grpcAddr, httpAddr} {
		if conn, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts after Stop", a)
		}
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.GRPCAddr() != grpcAddr || c.HTTPAddr() != httpAddr {
		t.Errorf("after Restart: grpc %s http %s, want %s %s", c.GRPCAddr(), c.HTTPAddr(), grpcAddr, httpAddr)
	}
	second := sent{service: "after", body: "after the outage", event: "e", time: time.Unix(1_700_000_001, 0).UTC(), attrs: map[string]any{"n": int64(2)}}
	emit(ctx, t, httpExporter(ctx, t, c), second)
	got, err := c.WaitLogs(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Log{want(first), want(second)}, got); diff != "" {
		t.Errorf("Logs() after Restart (-want +got):\n%s", diff)
	}
	// Restart of a running collector: stop and start in one call.
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	assertListensOnLoopbackOnly(t, c)
}

// TestParseLogs reads the value types a test exporter may send that the SDK
// test above does not: kvlist, bytes, a double as a string, a non-string
// body, a half-written last line.
func TestParseLogs(t *testing.T) {
	in := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}}]},"scopeLogs":[{"scope":{"name":"sc"},"logRecords":[` +
		`{"timeUnixNano":"1000000001","body":{"kvlistValue":{"values":[{"key":"k","value":{"intValue":7}}]}},` +
		`"attributes":[{"key":"b","value":{"bytesValue":"aGk="}},{"key":"d","value":{"doubleValue":"NaN"}},{"key":"x","value":{}}],` +
		`"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708"}]}]}]}` + "\n" +
		`{"resourceLogs":[{"resource":{},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"half`
	got, err := ParseLogs([]byte(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d records, want 1: %+v", len(got), got)
	}
	l := got[0]
	if l.Body != `{"k":7}` || !l.Time.Equal(time.Unix(1, 1)) || l.Scope != "sc" || l.Resource["service.name"] != "s" ||
		string(l.Attributes["b"].([]byte)) != "hi" || l.Attributes["d"].(float64) == l.Attributes["d"].(float64) ||
		l.Attributes["x"] != nil || l.TraceID != "0102030405060708090a0b0c0d0e0f10" || l.SpanID != "0102030405060708" {
		t.Errorf("parsed %+v", l)
	}
	if _, err := ParseLogs([]byte("{not json\n"), "bad"); err == nil || !strings.HasPrefix(err.Error(), "bad:1:") {
		t.Errorf("ParseLogs of a broken line: %v, want an error naming bad:1", err)
	}
}

// assertListensOnLoopbackOnly checks every TCP socket the collector listens
// on (its fds matched against /proc/net/tcp{,6}): all on loopback, none
// beyond the two receivers.
func assertListensOnLoopbackOnly(t *testing.T, c *Collector) {
	t.Helper()
	c.mu.Lock()
	pid := c.proc.cmd.Process.Pid
	c.mu.Unlock()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var listening []string
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			addr, err := procAddr(f[1])
			if err != nil {
				t.Fatal(err)
			}
			listening = append(listening, addr.String())
			if !addr.IP.IsLoopback() {
				t.Errorf("the collector listens on %s, not loopback", addr)
			}
		}
	}
	if len(listening) != 2 {
		t.Errorf("the collector listens on %v, want only the two receivers %s and %s", listening, c.GRPCAddr(), c.HTTPAddr())
	}
}

// procAddr decodes /proc/net/tcp's "0100007F:1F90" (the address's 32-bit
// words in host order, little-endian here) and tcp6's 32-digit form.
func procAddr(s string) (*net.TCPAddr, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	if !ok || err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, fmt.Errorf("bad /proc/net address %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for i := 0; i < 4; i++ {
			ip[w+i] = raw[w+3-i]
		}
	}
	var port int
	if _, err := fmt.Sscanf(hexPort, "%x", &port); err != nil {
		return nil, fmt.Errorf("bad /proc/net port %q", s)
	}
	return &net.TCPAddr{IP: ip, Port: port}, nil
}
