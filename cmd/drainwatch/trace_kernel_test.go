package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestTraceRefused runs `drainwatch trace --netns` against a namespace that
// refuses n connection attempts, stops it with SIGINT, and checks the JSON
// stream and the summary.
func TestTraceRefused(t *testing.T) {
	const n = 5
	privileged.RequireRoot(t)
	privileged.RequireFile(t, "/sys/kernel/btf/vmlinux", "kernel BTF")
	client, server := vethPair(t)
	cmd := exec.Command(os.Args[0], "trace", "--netns", server.Path(), "--format", "json")
	cmd.Env = append(os.Environ(), "DRAINWATCH_TEST_MAIN=1")
	stdout, stderr := pipe(t, cmd.StdoutPipe), pipe(t, cmd.StderrPipe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	logs := lines(stderr)
	waitFor(t, logs, "PROBE") // the probe table comes first
	waitFor(t, logs, "tp_btf/tcp_send_reset")
	waitFor(t, logs, "watching network namespace")
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := client.Dial(ctx, "tcp4", "10.251.0.2:9")
		cancel()
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("attempt %d: %v, want ECONNREFUSED", i, err)
		}
	}
	events := lines(stdout)
	for i := 0; i < n; i++ {
		var ev map[string]any
		line := next(t, events)
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["type"] != "refused" || ev["local"] != "10.251.0.2:9" {
			t.Fatalf("event %d: %q (%v)", i, line, err)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	summary := collectUntilClosed(logs)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("trace exit: %v\n%s", err, summary)
	}
	for _, want := range []string{"refused                5", "lost                   0"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
}

func vethPair(t *testing.T) (client, server *netlab.NS) {
	t.Helper()
	for _, p := range []**netlab.NS{&client, &server} {
		ns, err := netlab.New("dwk-trace")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ns.Close() })
		*p = ns
	}
	if err := netlab.Veth(netlab.End{NS: client, Name: "veth0", CIDR: "10.251.0.1/24"},
		netlab.End{NS: server, Name: "veth0", CIDR: "10.251.0.2/24"}); err != nil {
		t.Fatal(err)
	}
	return client, server
}

func pipe(t *testing.T, open func() (io.ReadCloser, error)) io.Reader {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// lines streams r line by line; the channel closes at EOF.
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no line within 10s")
	}
	return ""
}

func waitFor(t *testing.T, ch <-chan string, substr string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if strings.Contains(next(t, ch), substr) {
			return
		}
	}
	t.Fatalf("no log line with %q", substr)
}

func collectUntilClosed(ch <-chan string) string {
	var b strings.Builder
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return b.String()
			}
			b.WriteString(l + "\n")
		case <-timeout:
			return b.String()
		}
	}
}
