package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/collector"
)

// defaultPrometheusWindow is --since's default with --prometheus: a week
// of rollouts, as the CronJob sketch of docs/advise.md asks for.
const defaultPrometheusWindow = 7 * 24 * time.Hour

// prometheusFlags say where the Prometheus that scrapes the daemons is,
// and how to reach it. A bearer token goes only where it cannot be read
// on the way: over https, or to a loopback address.
type prometheusFlags struct {
	url, tokenFile, caFile string
}

func (p *prometheusFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.url, "prometheus", "", "read the shipped histograms from this Prometheus (https://prometheus.example:9090) instead of the daemons' terminations, "+
		"over --since (default with --prometheus: 168h): no per-source lag, percentiles are bucket upper bounds (docs/advise.md); not with --url")
	fs.StringVar(&p.tokenFile, "prometheus-token-file", "", "a file holding a bearer token for --prometheus, sent only over https or to a loopback address")
	fs.StringVar(&p.caFile, "prometheus-ca-file", "", "CA certificate (PEM) that signed --prometheus's serving certificate (default: the system's roots)")
}

// checkPrometheus refuses --prometheus beside the daemons' flags, and a
// token that would cross the network in clear text.
func (f adviseFlags) checkPrometheus() error {
	p := f.prom
	if p.url == "" {
		if p.tokenFile != "" || p.caFile != "" {
			return errors.New("--prometheus-token-file and --prometheus-ca-file go with --prometheus URL")
		}
		return nil
	}
	u, err := url.Parse(p.url)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("--prometheus %q: want https://HOST:9090 (or http:// for one without TLS)", p.url)
	case len(f.urls) > 0:
		return errors.New("--prometheus and --url contradict each other: advise reads either Prometheus or the daemons")
	case f.token != "" || f.caFile != "" || f.insecure || f.serverName != "":
		return errors.New("--token, --certificate-authority, --tls-server-name and --insecure-skip-tls-verify are for --url daemons: " +
			"with --prometheus pass --prometheus-token-file and --prometheus-ca-file")
	case u.Scheme == "http" && p.tokenFile != "" && !loopback(u.Hostname()):
		return fmt.Errorf("--prometheus-token-file would cross %s in clear text: serve Prometheus with TLS and pass --prometheus https://%s "+
			"(with --prometheus-ca-file), or leave the token out for a Prometheus that asks for none", u.Redacted(), u.Host)
	}
	return nil
}

// loopback says whether host is this machine: localhost or a loopback IP.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// advisePrometheus is `drainwatch advise --prometheus`: the histograms of
// the selected workloads over --since, then the same rule and outputs as
// from the daemons. It returns the exit code.
func (f adviseFlags) advisePrometheus(ctx context.Context, stdout, stderr io.Writer) int {
	advices, err := f.prometheusAdvice(ctx, stderr)
	if err == nil {
		err = f.print(ctx, stdout, stderr, advices)
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch advise:", collector.Printable(err.Error()))
		return 1
	}
	return 0
}

func (f adviseFlags) prometheusAdvice(ctx context.Context, stderr io.Writer) ([]advise.Advice, error) {
	w, err := f.prometheusWindow(time.Now())
	if err != nil {
		return nil, err
	}
	client, err := f.prom.client()
	if err != nil {
		return nil, err
	}
	scope := advise.Scope{Namespace: f.namespace, Kind: f.kind, Name: f.workload}
	hs, warnings, err := advise.ReadHistograms(ctx, v1.NewAPI(client), scope, w)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "drainwatch advise: Prometheus:", collector.Printable(w))
	}
	if err != nil {
		return nil, err
	}
	return advise.AdviseHistograms(hs, f.rule), nil
}

// prometheusWindow is --since to now, a week without --since.
func (f adviseFlags) prometheusWindow(now time.Time) (advise.Window, error) {
	if f.since == "" {
		return advise.Window{Start: now.Add(-defaultPrometheusWindow), End: now}, nil
	}
	filter, err := f.filter(now)
	if err != nil {
		return advise.Window{}, err
	}
	if !filter.Since.Before(now) {
		return advise.Window{}, fmt.Errorf("--since %s is not in the past", f.since)
	}
	return advise.Window{Start: filter.Since, End: now}, nil
}

// client is the Prometheus API client: --prometheus-ca-file's roots, the
// token file's bearer token, no redirect followed (it would carry the
// token there).
func (p prometheusFlags) client() (api.Client, error) {
	// client-go's transport, as timeline's: the CA file, and the token
	// file re-read as it rotates (a projected ServiceAccount token).
	rt, err := rest.TransportFor(&rest.Config{BearerTokenFile: p.tokenFile, TLSClientConfig: rest.TLSClientConfig{CAFile: p.caFile}})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-token-file, --prometheus-ca-file: %w", err)
	}
	client, err := api.NewClient(api.Config{Address: p.url, RoundTripper: refuseRedirects(rt)})
	if err != nil {
		return nil, fmt.Errorf("--prometheus %s: %w", p.url, err)
	}
	return client, nil
}
