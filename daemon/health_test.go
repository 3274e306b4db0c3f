package daemon_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// testClock is the daemon's clock, moved forward by the test.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// healthTick is the daemon's tick in these tests: its stuck bound (120
// ticks, 4 min) is longer than any single move of the test clock, so that
// only a stalled loop looks stuck.
const healthTick = 2 * time.Second

// healthDaemon runs a daemon with the fake kernel and a test clock,
// serving on a loopback port, until it is ready.
func healthDaemon(t *testing.T, rc *rest.Config, k *fakeKernel, clock *testClock) (runningDaemon, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	cfg := daemon.Config{
		NodeName: uniqueNode("health"), Rest: rc, StateDir: t.TempDir(), CgroupRoot: t.TempDir(), ProcRoot: t.TempDir(),
		Log: testLogger(t), OpenKernel: k.open, TickEvery: healthTick, Listener: l, NoEvents: true, Now: clock.Now,
	}
	d := startDaemon(t, cfg)
	url := "http://" + l.Addr().String()
	must(t, wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { code, _ := httpGet(t, url+"/readyz"); return code == 200, nil }))
	return d, url
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

func wantHealthz(t *testing.T, url string, code int, body string) {
	t.Helper()
	if gotCode, got := httpGet(t, url+"/healthz"); gotCode != code || got != body {
		t.Fatalf("/healthz %d %q, want %d %q", gotCode, got, code, body)
	}
}

// TestHealthzKernelReaderAndLoop: ok while everything works; 503 with the
// reason when the reader stopped, when its reads fail past ReadFailingFor
// (not before), and when the loop processed no tick for StuckTicks periods.
func TestHealthzKernelReaderAndLoop(t *testing.T) {
	cp := cptest.Get(t)
	k, clock := newFakeKernel(false), &testClock{}
	d, url := healthDaemon(t, cp.RestConfig, k, clock)
	wantHealthz(t, url, 200, "ok\n")

	k.set(func() { k.reader = kernel.ReaderHealth{Stopped: true} })
	wantHealthz(t, url, 503, "unhealthy: the ring-buffer reader stopped: no kernel event is read\n")

	since := clock.Now()
	k.set(func() {
		k.reader = kernel.ReaderHealth{FailingSince: since, Err: errors.New("epoll_wait: bad file descriptor")}
	})
	clock.advance(daemon.ReadFailingFor - time.Second)
	wantHealthz(t, url, 200, "ok\n") // within the bound
	clock.advance(2 * time.Second)
	wantHealthz(t, url, 503, "unhealthy: ring-buffer reads failing since "+since.UTC().Format(time.RFC3339)+
		": epoll_wait: bad file descriptor\n")
	k.set(func() { k.reader = kernel.ReaderHealth{} })
	wantHealthz(t, url, 200, "ok\n")

	stall, stalled := make(chan struct{}), make(chan struct{})
	k.set(func() { k.stall, k.stalled = stall, stalled })
	<-stalled // the loop is inside a tick's Stats, or a checkpoint's
	clock.advance(daemon.StuckTicks*healthTick + time.Second)
	code, body := httpGet(t, url+"/healthz")
	if code != 503 || !strings.HasPrefix(body, "unhealthy: the daemon loop processed no tick since ") ||
		!strings.HasSuffix(body, " (bound 4m0s): it is stuck\n") {
		t.Fatalf("stuck loop: /healthz %d %q", code, body)
	}
	close(stall)
	must(t, wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { code, _ := httpGet(t, url+"/healthz"); return code == 200, nil }))
	if err := d.Healthy(); err != nil {
		t.Fatalf("after the loop resumed: %v", err)
	}
}

// cuttableDialer dials the API server until cut: then it closes every
// connection it made and refuses new ones (an API-server outage).
type cuttableDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cuttableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("test: API server unreachable")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cuttableDialer) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// TestHealthzAPIWatchFailing: a pod watch failing for less than
// APIFailingFor keeps /healthz ok (the kernel side keeps counting); past it
// /healthz is 503 with the error. The test clock moves 80 s after each
// observed failure: with the reflector's real backoff between retries (at
// most 26 s here) that stays under the 2 min quiet gap that ends a run.
func TestHealthzAPIWatchFailing(t *testing.T) {
	cp := cptest.Get(t)
	rc := rest.CopyConfig(cp.RestConfig)
	dialer := &cuttableDialer{}
	rc.Dial = dialer.dial
	clock := &testClock{}
	d, url := healthDaemon(t, rc, newFakeKernel(false), clock)
	wantHealthz(t, url, 200, "ok\n")

	dialer.setCut(true)
	t.Cleanup(func() { dialer.setCut(false) })
	failures := func() uint64 { return d.KubeStats().PodWatchFailures }
	waitFailure := func(after uint64) uint64 {
		t.Helper()
		must(t, wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 40*time.Second, true,
			func(context.Context) (bool, error) { return failures() > after, nil }))
		return failures()
	}
	n := waitFailure(0)
	start := clock.Now()
	for range 3 { // 240 s of failures: still alive
		clock.advance(80 * time.Second)
		n = waitFailure(n)
		wantHealthz(t, url, 200, "ok\n")
	}
	clock.advance(80 * time.Second) // 320 s > APIFailingFor
	waitFailure(n)
	code, body := httpGet(t, url+"/healthz")
	if code != 503 || !strings.HasPrefix(body, "unhealthy: the pod watch has been failing since ") ||
		!strings.Contains(body, "(bound 5m0s): ") || !strings.Contains(body, "test: API server unreachable") {
		t.Fatalf("after %s of failures: /healthz %d %q", clock.Now().Sub(start), code, body)
	}
	t.Logf("%d pod watch failures; /healthz: %s", failures(), strings.TrimSpace(body))
}
