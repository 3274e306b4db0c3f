package main

import (
	"bytes"
	"os"
	"testing"
	"time"
)

func TestParseRunFlagsFromEnvironment(t *testing.T) {
	t.Setenv("NODE_NAME", "node-7")
	t.Setenv("DRAINWATCH_STATE_DIR", "/var/lib/dw")
	t.Setenv("DRAINWATCH_LISTEN", "")
	t.Setenv("DRAINWATCH_HTTP2_TRACKING", "always")
	t.Setenv("DRAINWATCH_TLS_CERT_FILE", "/tls/tls.crt")
	t.Setenv("DRAINWATCH_KEEP_COMPLETED", "24h")
	t.Setenv("DRAINWATCH_SERIES_TTL", "2h")
	t.Setenv("DRAINWATCH_OTLP_ENDPOINT", "otel:4317")
	t.Setenv("DRAINWATCH_OTLP_HEADERS", "Authorization=Bearer t")
	f, err := parseRunFlags([]string{"--log-level", "debug"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := runFlags{nodeName: "node-7", stateDir: "/var/lib/dw", listen: "", cgroupRoot: "",
		logLevel: "debug", logFormat: "json", kubeconfig: f.kubeconfig, pinPath: "/sys/fs/bpf/drainwatch", kubeletComms: "kubelet",
		http2Tracking: "always", auth: "none", tlsCert: "/tls/tls.crt", ringBufferSize: "2Mi", completedInMemory: "256",
		keepCompleted: "24h", seriesTTL: "2h", startupWindow: time.Minute, blackholeWindow: 10 * time.Second,
		otlpEndpoint: "otel:4317", otlpProtocol: "grpc", otlpHeaders: "Authorization=Bearer t"}
	if f != want {
		t.Fatalf("flags = %+v, want %+v", f, want)
	}
	f, err = parseRunFlags([]string{"--node-name", "node-8"}, &bytes.Buffer{})
	if err != nil || f.nodeName != "node-8" {
		t.Fatalf("--node-name over $NODE_NAME: %+v, %v", f, err)
	}
	t.Setenv("DRAINWATCH_HTTP2_TRACKING", "")
	os.Unsetenv("DRAINWATCH_HTTP2_TRACKING")
	if f, err = parseRunFlags(nil, &bytes.Buffer{}); err != nil || f.http2Tracking != "auto" {
		t.Fatalf("--http2-tracking defaults to auto: %+v, %v", f, err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	if _, err := parseRunFlags([]string{"extra"}, &bytes.Buffer{}); err == nil {
		t.Error("a positional argument was accepted")
	}
	if _, err := newLogger(runFlags{logLevel: "loud", logFormat: "json"}, &bytes.Buffer{}); err == nil {
		t.Error("log level loud was accepted")
	}
	t.Setenv("NODE_NAME", "")
	if code := runCmd([]string{"--state-dir", t.TempDir(), "--listen", ""}); code != 2 {
		t.Errorf("run without a node name exited %d, want 2", code)
	}
	if code := runCmd([]string{"--node-name", "n", "--state-dir", t.TempDir(), "--auth", "basic"}); code != 2 {
		t.Errorf("run --auth basic exited %d, want 2", code)
	}
	if code := runCmd([]string{"--node-name", "n", "--state-dir", t.TempDir(), "--tls-cert-file", "c.pem"}); code != 2 {
		t.Errorf("run --tls-cert-file without --tls-key-file exited %d, want 2", code)
	}
	for _, bad := range [][]string{{"--namespaces", "Shop"}, {"--exclude-namespaces", "a,b_c"}, {"--pod-selector", "app in (web"},
		{"--namespaces", "shop", "--exclude-namespaces", "shop"}} {
		if code := runCmd(append([]string{"--node-name", "n", "--state-dir", t.TempDir()}, bad...)); code != 2 {
			t.Errorf("run %v exited %d, want 2", bad, code)
		}
	}
	for _, bad := range [][]string{{"--otlp-endpoint", "otel:4317", "--otlp-protocol", "thrift"},
		{"--otlp-endpoint", "otel:4317", "--otlp-headers", "Bearer t"},
		{"--otlp-endpoint", "https://otel:4318", "--otlp-insecure"},
		{"--otlp-endpoint", "otel:4317", "--otlp-ca-file", "/nonexistent/ca.crt"}} {
		if code := runCmd(append([]string{"--node-name", "n", "--state-dir", t.TempDir()}, bad...)); code != 2 {
			t.Errorf("run %v exited %d, want 2", bad, code)
		}
	}
	for _, size := range []string{"3Mi", "1Ki", "big", "-4Mi"} {
		if code := runCmd([]string{"--node-name", "n", "--state-dir", t.TempDir(), "--ring-buffer-size", size}); code != 2 {
			t.Errorf("run --ring-buffer-size %s exited %d, want 2", size, code)
		}
	}
	for _, n := range []string{"0", "-1", "many"} {
		if code := runCmd([]string{"--node-name", "n", "--state-dir", t.TempDir(), "--completed-in-memory", n}); code != 2 {
			t.Errorf("run --completed-in-memory %s exited %d, want 2", n, code)
		}
	}
	for _, d := range []string{"10s", "0", "week", "-24h"} {
		if code := runCmd([]string{"--node-name", "n", "--state-dir", t.TempDir(), "--keep-completed", d}); code != 2 {
			t.Errorf("run --keep-completed %s exited %d, want 2", d, code)
		}
		if code := runCmd([]string{"--node-name", "n", "--state-dir", t.TempDir(), "--series-ttl", d}); code != 2 {
			t.Errorf("run --series-ttl %s exited %d, want 2", d, code)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"4Mi": 4 << 20, "1Mi": 1 << 20, "262144": 256 << 10, "512Ki": 512 << 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
