// Package otlp sends drainwatch's complete terminations and startups as
// OpenTelemetry log records over OTLP (gRPC or HTTP), with the OpenTelemetry
// Go SDK's log exporters, so the records outlive their node in the backend
// that already keeps a cluster's logs (Loki, Elastic, an OpenTelemetry
// pipeline).
//
// The exporter keeps no queue of its own: its Source (the daemon's state
// store) is the queue. A record is marked pending in the same transaction
// that stores it, read back in batches, and acknowledged once the collector
// accepted it, so delivery is at least once and survives the collector's
// outages and the daemon's restarts: after an orderly stop nothing is sent
// twice, after a crash at most the batch in flight is. Nothing waits on the
// network in the daemon's loop: Notify never blocks. What could not be sent
// is counted by reason (drainwatch_otlp_records_dropped_total): records the
// store pruned while still pending (expired) and records the collector
// rejected as invalid (rejected).
package otlp

import (
	"context"
	"fmt"
	"net/http"
	neturl "net/url"

	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainwatch/drainwatch/exporter"
)

// Source is where pending records wait: the daemon's state store.
type Source interface {
	// Pending returns up to n records not yet acknowledged, oldest first,
	// and how many pending records it found gone (pruned before they were
	// sent) and forgot.
	Pending(n int) (entries []Entry, expired int, err error)
	// Acknowledge forgets the pending records of entries (as Pending
	// returned them).
	Acknowledge(entries []Entry) error
}

// Protocols the exporter speaks.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config configures the exporter.
type Config struct {
	// Endpoint is host:port, or a URL (http:// or https://) whose scheme
	// decides TLS; empty leaves the SDK's environment
	// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT).
	Endpoint string
	// Protocol is ProtocolGRPC (default) or ProtocolHTTP.
	Protocol string
	// Insecure sends without TLS (an endpoint without a scheme).
	Insecure bool
	// CAFile verifies the collector's certificate against this bundle
	// instead of the system's.
	CAFile string
	// Headers are sent with every export (authentication: "Authorization=Bearer ...").
	Headers map[string]string
	// Timeout bounds one export (default 10 s).
	Timeout time.Duration
	// Batch is the most records one export carries (default 256).
	Batch int
	// RetryMin and RetryMax bound the wait after a failed export, doubled
	// at each failure in a row (defaults 1 s and 1 min).
	RetryMin, RetryMax time.Duration
	Log                zerolog.Logger
}

// Metrics are the exporter's counters, registered by the daemon.
type Metrics struct {
	Exported prometheus.Counter
	Dropped  *prometheus.CounterVec
	Failures prometheus.Counter
}

// Reasons a record is dropped.
const (
	DropExpired  = "expired"
	DropRejected = "rejected"
)

// NewMetrics builds the exporter's counters (each reason at 0 from the first
// scrape).
func NewMetrics() Metrics {
	m := Metrics{
		Exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "drainwatch_otlp_records_exported_total",
			Help: "Terminations and startups the OTLP collector accepted."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drainwatch_otlp_records_dropped_total",
			Help: "Terminations and startups never sent over OTLP, by reason: expired (pruned from the state store, --keep-completed, before the collector took them), rejected (the collector refused them as invalid)."},
			[]string{"reason"}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "drainwatch_otlp_export_failures_total",
			Help: "OTLP exports that failed and will be retried (the collector unreachable, overloaded or timing out); the records stay pending."}),
	}
	for _, r := range []string{DropExpired, DropRejected} {
		m.Dropped.WithLabelValues(r)
	}
	return m
}

// Collectors lists the counters for registration.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Exported, m.Dropped, m.Failures}
}

// Exporter sends pending records from its Source.
type Exporter struct {
	cfg     Config
	src     Source
	exp     sdklog.Exporter
	metrics Metrics
	notify  chan struct{}
	done    chan struct{}
	ctx     context.Context // Run's, ended by Shutdown
	stop    context.CancelFunc
	once    sync.Once
}

// New builds an exporter; Run starts it.
func New(ctx context.Context, cfg Config, src Source, m Metrics) (*Exporter, error) {
	cfg = cfg.withDefaults()
	exp, err := newSDKExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return newExporter(cfg, src, m, exp), nil
}

func newExporter(cfg Config, src Source, m Metrics, exp sdklog.Exporter) *Exporter {
	e := &Exporter{cfg: cfg.withDefaults(), src: src, exp: exp, metrics: m, notify: make(chan struct{}, 1), done: make(chan struct{})}
	e.ctx, e.stop = context.WithCancel(context.Background())
	return e
}

func (cfg Config) withDefaults() Config {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(time.Minute, cfg.RetryMin)
	}
	return cfg
}

// newSDKExporter builds the SDK's OTLP log exporter for cfg, its own retries
// off: the exporter retries from the store.
func newSDKExporter(ctx context.Context, cfg Config) (sdklog.Exporter, error) {
	endpoint, insecure := cfg.Endpoint, cfg.Insecure
	url := strings.HasPrefix(endpoint, "http://") || strings.HasPrefix(endpoint, "https://")
	if strings.HasPrefix(endpoint, "http://") {
		insecure = true
	}
	tlsCfg, err := tlsConfig(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	switch cfg.Protocol {
	case "", ProtocolGRPC:
		opts := []otlploggrpc.Option{otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}),
			otlploggrpc.WithTimeout(cfg.Timeout)}
		if endpoint != "" {
			if url {
				opts = append(opts, otlploggrpc.WithEndpointURL(endpoint))
			} else {
				opts = append(opts, otlploggrpc.WithEndpoint(endpoint))
			}
		}
		if insecure {
			opts = append(opts, otlploggrpc.WithInsecure())
		} else if tlsCfg != nil {
			opts = append(opts, otlploggrpc.WithTLSCredentials(credentials(tlsCfg)))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlploggrpc.WithHeaders(cfg.Headers))
		}
		return otlploggrpc.New(ctx, opts...)
	case ProtocolHTTP:
		opts := []otlploghttp.Option{otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}),
			otlploghttp.WithTimeout(cfg.Timeout)}
		if endpoint != "" {
			if url {
				endpoint = logsURL(endpoint)
				opts = append(opts, otlploghttp.WithEndpointURL(endpoint))
			} else {
				opts = append(opts, otlploghttp.WithEndpoint(endpoint))
			}
		}
		if insecure {
			opts = append(opts, otlploghttp.WithInsecure())
		} else if tlsCfg != nil {
			opts = append(opts, otlploghttp.WithTLSClientConfig(tlsCfg))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlploghttp.WithHeaders(cfg.Headers))
		}
		return otlploghttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("OTLP protocol %q: want %s or %s", cfg.Protocol, ProtocolGRPC, ProtocolHTTP)
}

// logsURL is an OTLP/HTTP endpoint URL with the logs path: a URL without a
// path is the collector's base (https://collector:4318), as
// OTEL_EXPORTER_OTLP_ENDPOINT is, and the logs go to its /v1/logs.
func logsURL(endpoint string) string {
	u, err := neturl.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/logs"
	return u.String()
}

// Notify says new records are pending; it never blocks.
func (e *Exporter) Notify() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// Run sends until Shutdown; call it once, in its own goroutine.
func (e *Exporter) Run() {
	ctx := e.ctx
	defer close(e.done)
	wait := time.Duration(0)
	timer := time.NewTimer(0) // a first pass sends what a restart left pending
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.notify:
			if wait > 0 {
				continue // retrying: the timer decides
			}
		case <-timer.C:
		}
		if e.drain(ctx) {
			wait = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait = min(max(2*wait, e.cfg.RetryMin), e.cfg.RetryMax)
		timer.Reset(wait)
	}
}

// drain sends batches until none is pending (true) or an export fails.
func (e *Exporter) drain(ctx context.Context) bool {
	for ctx.Err() == nil {
		entries, expired, err := e.src.Pending(e.cfg.Batch)
		if expired > 0 {
			e.metrics.Dropped.WithLabelValues(DropExpired).Add(float64(expired))
			e.cfg.Log.Warn().Int("records", expired).Msg("OTLP: records pruned from the state store before the collector took them (raise --keep-completed, or mend the collector)")
		}
		if err != nil {
			e.cfg.Log.Error().Err(err).Msg("OTLP: reading pending records")
			return false
		}
		if len(entries) == 0 {
			return true
		}
		err = e.send(ctx, entries)
		if err != nil && ctx.Err() != nil {
			return false // stopping: the records stay pending
		}
		if err != nil && !rejected(err) {
			e.metrics.Failures.Inc()
			e.cfg.Log.Warn().Err(err).Int("records", len(entries)).Msg("OTLP export failed; the records stay pending and are retried")
			return false
		}
		if err != nil {
			e.metrics.Dropped.WithLabelValues(DropRejected).Add(float64(len(entries)))
			e.cfg.Log.Error().Err(err).Int("records", len(entries)).Msg("OTLP: the collector rejected records as invalid; they are dropped")
		} else {
			e.metrics.Exported.Add(float64(len(entries)))
		}
		if err := e.src.Acknowledge(entries); err != nil {
			e.cfg.Log.Error().Err(err).Msg("OTLP: acknowledging sent records (they may be sent again)")
			return false
		}
	}
	return false
}

// send exports one batch with the SDK's exporter.
func (e *Exporter) send(ctx context.Context, entries []Entry) error {
	recs := make([]sdklog.Record, 0, len(entries))
	now := time.Now()
	for _, en := range entries {
		r, err := sdkRecord(ctx, en, now)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	return e.exp.Export(ctx, recs)
}

// rejected: the collector refused the records as invalid; sending them
// again would fail again.
func rejected(err error) bool {
	if s, ok := status.FromError(err); ok && s.Code() == codes.InvalidArgument {
		return true // OTLP/gRPC (FromError unwraps the SDK's wrapping)
	}
	// OTLP/HTTP: the SDK's error carries the status line, no typed status.
	return strings.Contains(err.Error(), fmt.Sprintf("%d %s", http.StatusBadRequest, http.StatusText(http.StatusBadRequest)))
}

// sdkRecord builds the SDK's record of one entry, with the entry's resource:
// the SDK sets a record's resource from its LoggerProvider, so each entry
// goes through a provider of its own pod (cheap: a struct, no goroutine).
func sdkRecord(ctx context.Context, en Entry, now time.Time) (sdklog.Record, error) {
	res := sdkresource.NewSchemaless(en.Resource...)
	c := &capture{}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(c),
		sdklog.WithAttributeCountLimit(-1), sdklog.WithAttributeValueLengthLimit(-1))
	var r log.Record
	r.SetEventName(en.EventName)
	r.SetTimestamp(en.Time)
	r.SetObservedTimestamp(now)
	r.SetSeverity(log.SeverityInfo)
	r.SetSeverityText("INFO")
	r.SetBody(attribute.StringValue(en.Body))
	r.AddAttributes(en.Attrs...)
	lp.Logger("github.com/drainwatch/drainwatch", log.WithInstrumentationVersion(exporter.Version)).Emit(ctx, r)
	if c.rec == nil {
		return sdklog.Record{}, fmt.Errorf("OTLP record of %s was not emitted", en.ID)
	}
	return *c.rec, nil
}

// capture is a Processor that keeps the one record its provider emits.
type capture struct{ rec *sdklog.Record }

func (c *capture) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *capture) OnEmit(_ context.Context, r *sdklog.Record) error {
	cl := r.Clone()
	c.rec = &cl
	return nil
}
func (c *capture) Shutdown(context.Context) error   { return nil }
func (c *capture) ForceFlush(context.Context) error { return nil }

// Shutdown stops Run (which must have been started), sends what is pending
// for up to ctx's deadline (an orderly stop leaves nothing to send twice),
// and stops the SDK's exporter.
func (e *Exporter) Shutdown(ctx context.Context) error {
	var err error
	e.once.Do(func() {
		e.stop()
		<-e.done
		e.drain(ctx)
		err = e.exp.Shutdown(ctx)
	})
	return err
}

// ParseHeaders reads "k1=v1,k2=v2" (the OTLP environment's format).
func ParseHeaders(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("OTLP header %q: want key=value", kv)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}
