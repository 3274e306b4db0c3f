package daemon

import (
	"context"
	"errors"

	"github.com/drainwatch/drainwatch/exporter"
)

// startServer serves /metrics, the API and /ui when an address or listener
// is configured; its error (a port in use) ends the daemon.
func (d *Daemon) startServer(ctx context.Context) <-chan error {
	errc := make(chan error, 1)
	if d.cfg.ListenAddr == "" && d.cfg.Listener == nil {
		return errc
	}
	srv := exporter.NewServer(exporter.ServerConfig{
		Source: d.view, Metrics: d.metrics, Ready: d.ready, Healthy: d.Healthy, Now: d.cfg.Now,
		Log: d.log.With().Str("component", "http").Logger(),
	})
	go func() {
		var err error
		if d.cfg.Listener != nil {
			err = srv.Serve(ctx, d.cfg.Listener)
		} else {
			err = srv.ListenAndServe(ctx, d.cfg.ListenAddr)
		}
		if err != nil {
			errc <- err
		}
	}()
	return errc
}

// ready is /readyz: ready once the node's pods are listed.
func (d *Daemon) ready() error {
	if k := d.kube.Load(); k == nil || !k.Synced() {
		return errors.New("pods of this node not listed yet")
	}
	return nil
}
