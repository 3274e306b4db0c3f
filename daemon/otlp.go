package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// otlpShutdown bounds what an orderly stop waits for the collector to take
// the records still pending (a slow or absent collector: they stay pending
// in the store for the next start).
const otlpShutdown = 5 * time.Second

// startOTLP starts the OTLP exporter on the store (Config.OTLP): what a
// previous run left pending goes first.
func (d *Daemon) startOTLP() error {
	if d.cfg.OTLP == nil {
		return nil
	}
	cfg := *d.cfg.OTLP
	cfg.Log = d.log.With().Str("component", "otlp").Logger()
	exp, err := otlp.New(context.Background(), cfg, otlpSource{s: d.store, node: d.cfg.NodeName}, *d.otlpMetrics)
	if err != nil {
		return fmt.Errorf("configuring the OTLP exporter: %w", err)
	}
	d.otlp = exp
	go exp.Run()
	d.log.Info().Str("endpoint", cfg.Endpoint).Str("protocol", cfg.Protocol).Msg("sending complete terminations and startups over OTLP")
	return nil
}

// stopOTLP sends what the final checkpoint left pending, for up to
// otlpShutdown.
func (d *Daemon) stopOTLP() {
	if d.otlp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), otlpShutdown)
	defer cancel()
	if err := d.otlp.Shutdown(ctx); err != nil {
		d.log.Warn().Err(err).Msg("stopping the OTLP exporter")
	}
}
