package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// --pprof-addr is off unless set, and its handler serves the heap profile
// and the index of profiles.
func TestPprofAddr(t *testing.T) {
	t.Setenv("DRAINWATCH_PPROF_ADDR", "")
	f, err := parseRunFlags(nil, io.Discard)
	if err != nil || f.pprofAddr != "" {
		t.Fatalf("default --pprof-addr %q (%v), want empty", f.pprofAddr, err)
	}
	if f, err = parseRunFlags([]string{"--pprof-addr", "127.0.0.1:6060"}, io.Discard); err != nil || f.pprofAddr != "127.0.0.1:6060" {
		t.Fatalf("--pprof-addr parsed as %q (%v)", f.pprofAddr, err)
	}
	srv := httptest.NewServer(pprofHandler())
	defer srv.Close()
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/heap?debug=1": "heap profile"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q", path, resp.StatusCode, want)
		}
	}
}

// The heap profile's sampling stays on only when --pprof-addr serves it.
func TestSampleHeapOnlyWhenServed(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 512 * 1024
	sampleHeap("127.0.0.1:6060")
	if runtime.MemProfileRate != 512*1024 {
		t.Fatalf("MemProfileRate %d with --pprof-addr set, want Go's default 524288", runtime.MemProfileRate)
	}
	sampleHeap("")
	if runtime.MemProfileRate != 0 {
		t.Fatalf("MemProfileRate %d without --pprof-addr, want 0", runtime.MemProfileRate)
	}
}

// --pprof-addr takes a loopback IP only: the profiles have no
// authentication. Parse-only: nothing listens.
func TestPprofAddrLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:6060": true, "127.1.2.3:6060": true, "[::1]:6060": true, "[::ffff:127.0.0.1]:6060": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "10.0.0.5:6060": false,
		"localhost:6060": false, "example.com:6060": false, "[fe80::1%lo]:6060": false, "127.0.0.1": false,
	} {
		_, err := parseRunFlags([]string{"--pprof-addr", addr}, io.Discard)
		if (err == nil) != ok {
			t.Errorf("--pprof-addr %s: error %v, want accepted %v", addr, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--pprof-addr") {
			t.Errorf("--pprof-addr %s: the error does not name the flag: %v", addr, err)
		}
	}
}
