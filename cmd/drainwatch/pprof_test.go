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
