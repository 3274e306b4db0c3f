package kernel

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestPipelinedCountsConnections: HTTP/1.1 pipelining against a Go
// net/http server (testdata/h2server speaks HTTP/1.1 too), then SIGKILL.
// One connection pipelines a held /slow and two more requests behind it;
// another pipelines three requests, all answered. drainwatch counts
// connections, not requests: exactly one conn_closed_inflight, for the
// first connection, although three of its requests were unanswered.
func TestPipelinedCountsConnections(t *testing.T) {
	bin := buildH2Server(t)
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	heldFile := filepath.Join(t.TempDir(), "held")
	cmd := l.startServer(t, 8080, bin, "-addr", serverIP+":8080", "-held", heldFile)
	get := func(path string) string { return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, serverIP) }
	held := mustDial(t, l)
	fmt.Fprint(held, get("/slow")+get("/")+get("/"))
	waitFileSize(t, heldFile, 1)
	answered := mustDial(t, l)
	fmt.Fprint(answered, get("/")+get("/")+get("/"))
	answered.SetReadDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(answered)
	for i := 0; i < 3; i++ {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	waitAcked(t, held)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventExit, srv) > 0 })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	port := held.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	n := 0
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight || ev.NetnsIno != srv {
			continue
		}
		n++
		if ev.Remote.Port() != port || ev.Cause != collector.CauseSigkill {
			t.Errorf("unexpected %v from :%d cause %v", ev.Type, ev.Remote.Port(), ev.Cause)
		}
	}
	if n != 1 {
		t.Fatalf("%d conn_closed_inflight, want exactly 1 (the connection with pipelined requests unanswered)", n)
	}
}
