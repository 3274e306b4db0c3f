// Package daemon wires one node's drainwatch and does nothing else: the
// kernel collector (collector/kernel), the API-side collector
// (collector/kube), the scope binding (collector/node), the correlator, the
// exporter's server and the state store, around a single loop goroutine
// that owns the correlator. It is what `drainwatch run` runs, and what
// end-to-end tests run in-process.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/collector/node"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// apiBuffer is the capacity of the API events channel.
const apiBuffer = 4096

// forever ends a gap that lasts as long as this run.
var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Daemon is one node's running drainwatch.
type Daemon struct {
	cfg    Config
	log    zerolog.Logger
	store  *Store
	corr   *correlate.Correlator
	kernel Kernel
	// kube is set by Run and read by KubeStats from other goroutines.
	kube    atomic.Pointer[kube.Kube]
	scopes  *node.Scopes
	http2   http2Pods
	metrics *exporter.Metrics
	view    *terminationView
	// startups is the HTTP side's copy of the new pods' startups.
	startups *startupView
	api      chan apiEvent
	sink     apiSink                 // into api until the API side stops
	events   *exporter.EventReporter // nil when Config.NoEvents

	completed []correlate.Termination // since the last checkpoint
	// startupsDone are the startups completed since the last checkpoint.
	startupsDone []correlate.Startup
	counters     loopCounters
	// beat is when the loop last processed a tick (Unix ns), read by
	// Healthy from the HTTP server's goroutines.
	beat atomic.Int64
	// relist reconciles the previous run's pods with the first pod list.
	relist relist
	// state counts state-file resets and failed checkpoints.
	state stateMetrics
	// eventsDropped is drainwatch_events_dropped_total, registered by New
	// (nil when Config.NoEvents).
	eventsDropped *prometheus.CounterVec
	// otlp sends complete records to a collector (nil when Config.OTLP is).
	otlp        *otlp.Exporter
	otlpMetrics *otlp.Metrics
}

// New checks the configuration; Run starts everything.
func New(cfg Config) (*Daemon, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg: cfg, log: cfg.Log, corr: correlate.New(cfg.Correlate), view: newTerminationView(cfg.CompletedInMemory, cfg.Log),
		startups: &startupView{},
		api:      make(chan apiEvent, apiBuffer),
	}
	var dm daemonMetrics
	d.metrics, dm = newMetrics(exporter.Options{Now: cfg.Now, SeriesTTL: cfg.SeriesTTL}, !cfg.NoEvents, cfg.OTLP != nil)
	d.state, d.eventsDropped, d.otlpMetrics = dm.state, dm.eventsDropped, dm.otlp
	return d, nil
}

// Terminations and Get read the daemon's terminations (safe for concurrent
// use): what the HTTP API serves.
func (d *Daemon) Terminations() []correlate.Termination        { return d.view.Terminations() }
func (d *Daemon) Get(uid string) (correlate.Termination, bool) { return d.view.Get(uid) }

// Watching reports whether the kernel watches the pod's network namespace
// (as of the last tick): its connections are counted from then on.
func (d *Daemon) Watching(podUID string) bool { return d.view.isWatched(podUID) }

// Metrics is the daemon's metrics registry owner.
func (d *Daemon) Metrics() *exporter.Metrics { return d.metrics }

// KubeStats reports the API watch events received (nil before Run).
func (d *Daemon) KubeStats() kube.Stats {
	k := d.kube.Load()
	if k == nil {
		return kube.Stats{}
	}
	return k.Stats()
}

// Run runs the daemon until ctx is done, then checkpoints and returns.
func (d *Daemon) Run(ctx context.Context) (err error) {
	tuneMemory(d.log)
	st, err := openState(d.cfg.StateDir, d.log, d.state, d.cfg.Now())
	if err != nil {
		return err
	}
	d.store = st.store
	d.view.readOlder(d.store)
	defer func() { err = errors.Join(err, d.store.Close()) }()
	cp, restored := st.cp, st.restored
	d.restoreCompleted(cp, st.completed)
	d.startups.restore(st.startups)
	if d.kernel, err = d.cfg.OpenKernel(d.kernelOptions(restored)); err != nil {
		return fmt.Errorf("opening the kernel collector: %w", err)
	}
	if err := d.kernel.SetProbeComms(d.probeComms()); err != nil {
		d.kernel.Close()
		return fmt.Errorf("listing the kubelet's commands in the kernel: %w", err)
	}
	d.scopes = node.NewScopes(d.kernel, d.corr, d.cfg.CgroupRoot, d.cfg.ProcRoot, d.log)
	if restored {
		if err := d.restore(cp); err != nil {
			d.kernel.Close()
			return err
		}
	}
	d.reportProbes()
	d.baselineLost(cp, restored)
	if err := d.startOTLP(); err != nil {
		d.kernel.Close()
		return err
	}
	// After the final checkpoint (runWired's), before the store closes.
	defer d.stopOTLP()
	return d.runWired(ctx)
}

// runWired starts the API side and the server, runs the loop, and shuts
// down in order: API watches, kernel (draining its last events), a final
// checkpoint.
func (d *Daemon) runWired(ctx context.Context) error {
	kctx, stopKube := context.WithCancel(ctx)
	defer stopKube()
	kubeErr := make(chan error, 1)
	rc, err := d.restConfig()
	if err == nil {
		err = d.startKube(kctx, rc, kubeErr)
	}
	if err != nil {
		d.kernel.Close()
		return err
	}
	srvErr := d.startServer(kctx, rc)
	loopErr := d.loop(ctx, kubeErr, srvErr)
	stopKube()
	closeErr := d.closeKernel()
	d.drainKernel()
	// Events the reader dropped while nobody consumed are a gap, saved
	// with the final checkpoint.
	d.accountLost(d.cfg.Now())
	cpErr := d.checkpoint(closeErr == nil)
	d.scopes.CloseFiles()
	if d.events != nil {
		d.events.Shutdown()
	}
	d.log.Info().Msg("drainwatch stopped")
	return errors.Join(loopErr, closeErr, cpErr)
}

// restConfig is Config.Rest, else the kubeconfig's or the in-cluster
// configuration.
func (d *Daemon) restConfig() (*rest.Config, error) {
	if d.cfg.Rest != nil {
		return d.cfg.Rest, nil
	}
	return kube.RestConfig(d.cfg.Kubeconfig)
}

func (d *Daemon) startKube(ctx context.Context, rest *rest.Config, errc chan<- error) error {
	d.sink = apiSink{events: d.api, done: ctx.Done()}
	api, err := kube.New(kube.Config{
		NodeName: d.cfg.NodeName, Rest: rest, Sink: d.sink, Now: d.cfg.Now, AllNodes: d.cfg.WatchAllNodes, Scope: d.cfg.Scope,
		Log: d.log.With().Str("component", "kube").Logger(),
	})
	if err != nil {
		return err
	}
	d.kube.Store(api)
	if !d.cfg.NoEvents {
		client, err := kube.NewClients(rest)
		if err != nil {
			return fmt.Errorf("creating the Events client: %w", err)
		}
		d.events = exporter.NewEventReporter(client, d.log.With().Str("component", "events").Logger(),
			exporter.EventOptions{Node: d.cfg.NodeName, Dropped: d.eventsDropped})
	}
	go func() { errc <- api.Run(ctx) }()
	return nil
}

func (d *Daemon) reportProbes() {
	for _, p := range d.kernel.Probes() {
		d.metrics.SetProbeState(p.Name, string(p.State))
		if p.Name == blackholeProbe {
			d.corr.SeeBlackholes(p.Attached())
		}
		if reason := p.PartialReason(); reason != "" {
			// Open-ended: every termination from now on misses what this
			// probe (or its fallback) does not report.
			d.corr.KernelGap(reason, d.cfg.Now(), forever)
		}
	}
}

// blackholeProbe is the probe that reports blackholed SYNs
// (collector/kernel's probe table): terminations wait for them only while
// it is attached.
const blackholeProbe = "blackhole"

// probeComms are the kubelet's command names, as the correlator has them.
func (d *Daemon) probeComms() []string {
	if c := d.cfg.Correlate.ProbeComms; len(c) > 0 {
		return c
	}
	return correlate.DefaultConfig().ProbeComms
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
