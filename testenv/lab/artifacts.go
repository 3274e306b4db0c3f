package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/testenv/chromium"
)

// WriteResults fills the results directory: summary.json (the table, and
// the alert and dashboard checks when they ran), table.txt, per scenario its timelines (JSON and text) and client records,
// each daemon's /metrics, and the /ui page of each daemon that reported a
// scenario's terminations (screenshots).
func (l *Lab) WriteResults(ctx context.Context, results []Result, checks *PromChecks) error {
	out := l.cfg.Out
	errs := []error{writeJSON(out, "summary.json", Summary{Scenarios: results, Prometheus: checks}),
		os.WriteFile(filepath.Join(out, "table.txt"), []byte(Table(results)), 0o644)}
	for _, run := range l.runs {
		errs = append(errs, l.writeRun(run))
	}
	errs = append(errs, l.writeMetrics(ctx))
	if l.cfg.Screenshots {
		errs = append(errs, l.writeScreenshots(ctx))
	}
	l.progress.Step("results written to %s", out)
	return errors.Join(errs...)
}

func (l *Lab) writeRun(run scenarioRun) error {
	name := fileName(run.Name)
	dir := filepath.Join(l.cfg.Out, "timelines")
	errs := []error{writeJSON(dir, name+".json", run.Timelines), writeJSON(filepath.Join(l.cfg.Out, "clients"), name+".json", run.ClientLogs)}
	errs = append(errs, os.WriteFile(filepath.Join(dir, name+".txt"), []byte(run.Text), 0o644))
	return errors.Join(errs...)
}

// writeMetrics saves each daemon's /metrics text.
func (l *Lab) writeMetrics(ctx context.Context) error {
	dir := filepath.Join(l.cfg.Out, "metrics")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	var errs []error
	for _, d := range l.Daemons {
		var b bytes.Buffer
		if _, err := httpGet(ctx, d.Client, d.URL+"/metrics", &b); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, d.Node+".txt"), b.Bytes(), 0o644))
	}
	return errors.Join(errs...)
}

// writeScreenshots renders, for each scenario, the /ui page of every daemon
// that reported one of its terminations.
func (l *Lab) writeScreenshots(ctx context.Context) error {
	var errs []error
	for _, run := range l.runs {
		perNode := map[string]int{}
		for _, v := range run.Timelines {
			perNode[v.Node]++
		}
		for _, d := range l.Daemons {
			n := perNode[d.Node]
			if n == 0 {
				continue
			}
			file := filepath.Join(l.cfg.Out, "screenshots", fileName(run.Name)+"-"+d.Node+".png")
			base, stop, err := uiProxy(d)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			u := base + "/ui?namespace=" + url.QueryEscape(run.Namespace)
			err = chromium.Screenshot(ctx, u, file, 1000, pageHeight(n))
			stop()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			l.progress.Step("screenshot of %s → %s", u, file)
		}
	}
	return errors.Join(errs...)
}

// pageHeight is a window height that shows n timelines of /ui whole.
func pageHeight(n int) int { return min(160+n*400, 8000) }

// fileName turns a scenario name into a file name.
func fileName(name string) string {
	return strings.NewReplacer("/", "_", " ", "_", "(", "", ")", "").Replace(name)
}

// uiProxy is the address chromium reads d's /ui at: d's own without TLS;
// with the shipped values a loopback reverse proxy that verifies d and
// adds the lab's token, since chromium sends no Authorization header.
func uiProxy(d *Daemon) (string, func(), error) {
	if !strings.HasPrefix(d.URL, "https://") {
		return d.URL, func() {}, nil
	}
	target, err := url.Parse(d.URL)
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("the /ui proxy's listener: %w", err)
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = d.Client.Transport
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}
