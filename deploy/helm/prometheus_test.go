package helm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// prometheus is Debian's Prometheus run with a given configuration (the
// operator's), on a free 127.0.0.1 port; the kernel kills it with the test.
// testenv's promtest writes its own static configuration, hence this.
type prometheus struct{ url, log string }

func startPrometheus(t *testing.T, config []byte) prometheus {
	t.Helper()
	const bin = "/usr/bin/prometheus"
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: install Debian's prometheus package (make deps): %v", bin, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, config, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := prometheus{url: "http://" + addr, log: filepath.Join(dir, "prometheus.log")}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); out.Close() })
	return p
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query evaluates expr now; Prometheus not ready yet is an error too.
func (p prometheus) query(ctx context.Context, expr string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var qr struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&qr); err != nil {
		return nil, fmt.Errorf("decoding the answer to %q: %w", expr, err)
	}
	if qr.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, qr.Error)
	}
	return qr.Data.Result, nil
}

// queryUntil polls expr (every 200 ms, until ctx ends) until it returns n samples.
func (p prometheus) queryUntil(ctx context.Context, t *testing.T, expr string, n int) []sample {
	t.Helper()
	for {
		got, err := p.query(ctx, expr)
		if err == nil && len(got) == n {
			return got
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(p.log)
			t.Fatalf("%s: %d samples (%v), want %d; targets:\n%s\nPrometheus log:\n%s", expr, len(got), err, n, p.targets(), log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// targets is Prometheus' view of its targets (for failure messages).
func (p prometheus) targets() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/targets?state=any", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
