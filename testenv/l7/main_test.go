package l7_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/l7"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func TestMain(m *testing.M) { cptest.Main(m) }

var kinds = []l7.Kind{l7.HAProxy, l7.Nginx}

func testLog() zerolog.Logger {
	return zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
		Level(zerolog.WarnLevel)
}

// oneNode starts a 1-node cluster on the package's control plane; node
// names carry prefix, so tests never share nodes.
func oneNode(t *testing.T, prefix string) *cluster.Cluster {
	t.Helper()
	privileged.RequireRoot(t)
	privileged.RequireFile(t, "/usr/sbin/haproxy", "haproxy (make deps)")
	privileged.RequireFile(t, "/usr/sbin/nginx", "nginx (make deps)")
	return cluster.StartT(t, cluster.Options{Nodes: 1, NodePrefix: prefix, ControlPlane: cptest.Get(t),
		Log: testLog(), Dir: t.TempDir()})
}

// uniqueNS names a namespace for one test run on the shared control plane.
func uniqueNS(prefix string) string {
	return fmt.Sprintf("%s-%05x", prefix, rand.Uint32()&0xfffff)
}

// deploy applies a Deployment of the workload server (naive mode, extra
// args) and its Service "web", and waits for the rollout.
func deploy(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, replicas int32, args ...string) {
	t.Helper()
	dep := cluster.ServerDeployment(ns, "web", "naive", replicas, args...)
	if err := c.Apply(ctx, cluster.Namespace(ns), dep, cluster.ServiceFor(ns, "web")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
}

// startProxy starts the proxy in the fabric and closes it when the test ends.
func startProxy(ctx context.Context, t *testing.T, c *cluster.Cluster, cfg l7.Config) *l7.Proxy {
	t.Helper()
	cfg.Client, cfg.NetNS, cfg.Service, cfg.Dir, cfg.Log = c.Client, c.Fabric, "web", t.TempDir(), testLog()
	p, err := l7.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Close()
		if t.Failed() {
			dumpLogs(t, cfg.Dir)
		}
	})
	return p
}

// waitBackends waits until the proxy has applied a set of n backends.
func waitBackends(t *testing.T, p *l7.Proxy, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b := p.Backends(); len(b) == n {
			return b
		}
	}
	t.Fatalf("proxy backends %v after 30 s, want %d; updates %+v", p.Backends(), n, p.Updates())
	return nil
}

// client is an HTTP client whose connections start in the fabric; with
// keepAlive false every request opens its own connection.
func client(c *cluster.Cluster, keepAlive bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: c.Fabric.DialContext, DisableKeepAlives: !keepAlive}}
}

// observed is what the client saw: statuses and transport errors.
type observed struct {
	status map[int]int
	errs   []error
}

func (o *observed) do(hc *http.Client, method, url string) {
	if o.status == nil {
		o.status = map[int]int{}
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		panic(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		o.errs = append(o.errs, err)
		return
	}
	// Read to the end: an unread body closes the connection instead of
	// returning it to the client's pool.
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		o.errs = append(o.errs, err)
		return
	}
	o.status[resp.StatusCode]++
}

// closedCounts closes the proxy, so every log line is written, and parses
// its logs.
func closedCounts(t *testing.T, p *l7.Proxy) l7.Counts {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := p.Counts()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func other(all []string, keep string) string {
	i := slices.Index(all, keep)
	return all[1-i]
}

// dumpLogs shows a failed test the proxy's logs.
func dumpLogs(t *testing.T, dir string) {
	for _, name := range []string{"haproxy.out", "access.log", "error.log"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			t.Logf("%s:\n%s", name, b)
		}
	}
}
