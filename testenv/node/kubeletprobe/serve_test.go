package kubeletprobe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// session runs Serve over pipes and sends requests one line each.
type session struct {
	in  *io.PipeWriter
	out *bufio.Scanner
}

func newSession(t *testing.T) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = Serve(inR, outW); outW.Close() }()
	t.Cleanup(func() { inW.Close() })
	return &session{in: inW, out: bufio.NewScanner(outR)}
}

// do sends the requests at once and returns the responses by ID.
func (s *session) do(t *testing.T, reqs ...Request) map[uint64]Response {
	t.Helper()
	for _, r := range reqs {
		line, _ := json.Marshal(r)
		if _, err := s.in.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]Response{}
	for len(got) < len(reqs) && s.out.Scan() {
		var r Response
		if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got[r.ID] = r
	}
	return got
}

// TestProbesAndCounts: concurrent tcpSocket and httpGet probes against
// loopback listeners, one closed port; every attempt is classified, every
// httpGet came on a connection of its own with the kubelet's User-Agent.
func TestProbesAndCounts(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent()+" close="+fmt.Sprint(r.Close))
		mu.Unlock()
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	open := ln.Addr().String()

	s := newSession(t)
	got := s.do(t,
		Request{ID: 1, Op: OpTCPSocket, Target: open, TimeoutMS: 1000},
		Request{ID: 2, Op: OpTCPSocket, Target: closedAddr, TimeoutMS: 1000},
		Request{ID: 3, Op: OpHTTPGet, Target: open, Path: "/ok", TimeoutMS: 1000},
		Request{ID: 4, Op: OpHTTPGet, Target: open, Path: "/bad", TimeoutMS: 1000},
		Request{ID: 5, Op: OpHTTPGet, Target: closedAddr, Path: "/", TimeoutMS: 1000},
	)
	var lines []string
	for id := uint64(1); id <= 5; id++ {
		lines = append(lines, fmt.Sprintf("%d status=%d failed=%t", id, got[id].Status, got[id].Err != ""))
	}
	want := "1 status=0 failed=false|2 status=0 failed=true|3 status=200 failed=false|4 status=503 failed=true|5 status=0 failed=true"
	if strings.Join(lines, "|") != want {
		t.Fatalf("\n got %s\nwant %s", strings.Join(lines, "|"), want)
	}
	if msg := got[4].Err; msg != "HTTP probe failed with statuscode: 503" {
		t.Errorf("503 message %q", msg)
	}
	counts := s.do(t, Request{ID: 6, Op: OpCounts})[6]
	wantCounts := map[string]Count{open: {Attempts: 3, Accepted: 3}, closedAddr: {Attempts: 2, Refused: 2}}
	for target, w := range wantCounts {
		if counts.Counts[target] != w {
			t.Errorf("%s: %+v, want %+v", target, counts.Counts[target], w)
		}
	}
	if len(counts.Log) != 5 || len(counts.Counts) != 2 {
		t.Errorf("log %d attempts, %d targets; want 5, 2", len(counts.Log), len(counts.Counts))
	}
	sort.Strings(agents)
	if got := strings.Join(agents, ","); got != "kube-probe/1.37 close=true,kube-probe/1.37 close=true" {
		t.Errorf("server saw %s", got)
	}
}

// TestLogKeepsTheNewest: past MaxLog attempts the log drops the oldest
// (counted), never the newest a test asks about; the counts keep all.
func TestLogKeepsTheNewest(t *testing.T) {
	p := newProber()
	const n = MaxLog + 12345
	for i := range n {
		p.record(Attempt{Target: "10.244.1.2:8080", Outcome: Refused, Start: time.Unix(int64(i), 0)})
	}
	resp := p.snapshot(1)
	last := resp.Log[len(resp.Log)-1].Start.Unix()
	if last != n-1 || len(resp.Log)+resp.LogDropped != n || len(resp.Log) > MaxLog {
		t.Errorf("log of %d ending at attempt %d, %d dropped; want the newest (attempt %d), %d in all", len(resp.Log), last, resp.LogDropped, n-1, n)
	}
	if c := resp.Counts["10.244.1.2:8080"]; c.Refused != n {
		t.Errorf("counts %+v, want %d refused", c, n)
	}
}
