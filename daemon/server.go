package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/exporter"
)

// startServer serves /metrics, the API and /ui when an address or listener
// is configured; its error (a port in use) ends the daemon.
func (d *Daemon) startServer(ctx context.Context, rc *rest.Config) <-chan error {
	errc := make(chan error, 1)
	if d.cfg.ListenAddr == "" && d.cfg.Listener == nil {
		return errc
	}
	srv := exporter.NewServer(exporter.ServerConfig{
		Source: d.view, Startups: d.startups, Metrics: d.metrics, Ready: d.ready, Healthy: d.Healthy, Now: d.cfg.Now,
		Log: d.log.With().Str("component", "http").Logger(),
	})
	handler, tlsCfg, err := d.protect(srv.Handler(), rc)
	if err != nil {
		errc <- err
		return errc
	}
	go func() {
		if err := d.serve(ctx, handler, tlsCfg, srv.Limits()); err != nil {
			errc <- err
		}
	}()
	return errc
}

// protect puts authentication and authorization in front of everything
// but the probes (the kubelet's probes carry no token), and loads the
// serving certificate.
func (d *Daemon) protect(h http.Handler, rc *rest.Config) (http.Handler, *tls.Config, error) {
	tlsCfg, err := d.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	if d.cfg.Auth != AuthKubernetes {
		return h, tlsCfg, nil
	}
	auth, err := newKubeAuth(rc, d.log.With().Str("component", "auth").Logger())
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	// Exact paths: only the probes themselves stay open.
	mux.Handle("/healthz", h)
	mux.Handle("/readyz", h)
	mux.Handle("/", auth.protect(h))
	return mux, tlsCfg, nil
}

// tlsConfig is the serving certificate's configuration: from files, or
// self-signed, or nil for plain HTTP.
func (d *Daemon) tlsConfig() (*tls.Config, error) {
	switch {
	case d.cfg.TLSCertFile != "":
		cert, err := newServingCert(d.cfg.TLSCertFile, d.cfg.TLSKeyFile, d.log.With().Str("component", "tls").Logger())
		if err != nil {
			return nil, err
		}
		return cert.tlsConfig(), nil
	case d.cfg.TLSSelfSigned:
		return selfSignedConfig(d.cfg.NodeName)
	}
	return nil, nil
}

// serve listens (unless Config.Listener is set) and serves until ctx is
// done, then shuts down within 5 s. A request with a body is refused before
// authentication, which would leave the body unread on the connection.
func (d *Daemon) serve(ctx context.Context, h http.Handler, tlsCfg *tls.Config, lim exporter.Limits) error {
	l := d.cfg.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", d.cfg.ListenAddr); err != nil {
			return fmt.Errorf("listening on %s: %w", d.cfg.ListenAddr, err)
		}
	}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	d.log.Info().Str("addr", l.Addr().String()).Bool("tls", tlsCfg != nil).Str("auth", d.cfg.Auth).
		Msg("serving metrics, API and UI")
	return exporter.ServeUntil(ctx, exporter.ReadOnly(h), l, lim)
}

// Ready is what /readyz serves: nil once the node's pods are listed (a
// pod created from then on is seen before it is Ready: its startup is
// observed).
func (d *Daemon) Ready() error { return d.ready() }

// ready is /readyz: ready once the node's pods are listed.
func (d *Daemon) ready() error {
	if k := d.kube.Load(); k == nil || !k.Synced() {
		return errors.New("pods of this node not listed yet")
	}
	return nil
}
