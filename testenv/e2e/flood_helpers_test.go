package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/soak"
)

// pinDirOf is where lab.StartDaemon's daemon (default pin path) pins a
// node's maps.
func pinDirOf(node string) string { return daemon.NodePinPath(daemon.DefaultPinPath, node) }

// scopeKey is struct scope_key (bpf/drainwatch.h): a netns scope is kind 1.
type scopeKey struct {
	ID        uint64
	Kind, Pad uint32
}

// waitScopesWatched waits until the daemon watches the pods' network
// namespaces: their keys are in the pinned scopes map.
func waitScopesWatched(ctx context.Context, t *testing.T, c *cluster.Cluster, pinDir string, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		info, ok := c.Nodes[0].Pod(p.UID)
		if !ok {
			t.Fatalf("the node agent does not know pod %s", p.Name)
		}
		waitNetnsWatched(ctx, t, pinDir, p.Name, uint64(info.NetnsInode))
	}
}

// waitNetnsWatched waits until the network namespace ino of pod is in the
// scopes map pinned under pinDir.
func waitNetnsWatched(ctx context.Context, t *testing.T, pinDir, pod string, ino uint64) {
	t.Helper()
	scopes := pinnedScopes(t, pinDir)
	defer scopes.Close()
	var flags uint8
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return scopes.Lookup(scopeKey{ID: ino, Kind: 1}, &flags) == nil, nil
	})
	if err != nil {
		t.Fatalf("the daemon never watched %s's network namespace %d: %v", pod, ino, err)
	}
}

// pinnedScopes opens the scopes map pinned under pinDir (read-only).
func pinnedScopes(t *testing.T, pinDir string) *ebpf.Map {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(pinDir, "*", "map_scopes"))
	if len(paths) != 1 {
		t.Fatalf("pinned scopes maps under %s: %v, want one", pinDir, paths)
	}
	scopes, err := ebpf.LoadPinnedMap(paths[0], &ebpf.LoadPinOptions{ReadOnly: true})
	must(t, err)
	return scopes
}

// floodMetrics are the daemon's counters the flood test compares.
type floodMetrics struct{ refused, lost, untracked float64 }

var floodSeries = map[string]func(*floodMetrics) *float64{
	`drainwatch_kernel_events_total{type="refused"}`: func(m *floodMetrics) *float64 { return &m.refused },
	"drainwatch_kernel_events_lost_total":            func(m *floodMetrics) *float64 { return &m.lost },
	"drainwatch_kernel_connections_untracked_total":  func(m *floodMetrics) *float64 { return &m.untracked },
}

func readFloodMetrics(ctx context.Context, t *testing.T, url string) floodMetrics {
	t.Helper()
	m, err := scrapeFloodMetrics(ctx, url)
	must(t, err)
	return m
}

func scrapeFloodMetrics(ctx context.Context, url string) (floodMetrics, error) {
	var m floodMetrics
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("scraping %s/metrics: %w", url, err)
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if field := floodSeries[series]; ok && field != nil {
			if *field(&m), err = strconv.ParseFloat(value, 64); err != nil {
				return m, fmt.Errorf("%s: %w", series, err)
			}
			found++
		}
	}
	if found != len(floodSeries) {
		return m, fmt.Errorf("%s/metrics has %d of the %d series the flood test reads", url, found, len(floodSeries))
	}
	return m, sc.Err()
}

// waitFloodAccounted waits until the refusals made since before are
// delivered or counted lost (the reader may still be behind), then a
// second for any excess to show, and returns the counters.
func waitFloodAccounted(ctx context.Context, t *testing.T, url string, before floodMetrics, made int) floodMetrics {
	t.Helper()
	var m floodMetrics
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		m, err = scrapeFloodMetrics(ctx, url)
		return err == nil && m.refused-before.refused+m.lost-before.lost >= float64(made), nil
	})
	time.Sleep(time.Second)
	return readFloodMetrics(ctx, t, url)
}

// procCPU is the process's user and system CPU time (/proc/PID/stat).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	// Fields after the command (which may hold spaces) start after ") ".
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	must(t, err1, err2)
	const ticksPerSecond = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// logMaps logs the pinned hash maps' occupancy after the flood.
func logMaps(t *testing.T, pinDir string) {
	t.Helper()
	m, err := soak.MapEntries(pinDir)
	if err != nil {
		t.Logf("pinned maps: %v", err)
	}
	t.Logf("pinned hash maps after the flood, entries: %v", m)
}

// pinnedLost sums the pinned per-CPU ring-buffer reserve failures: the
// kernel's share of drainwatch_kernel_events_lost_total (the rest were
// dropped at the correlator's queue), in all and of refused records.
func pinnedLost(t *testing.T, pinDir string) kernelLoss {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(pinDir, "*", "map_lost"))
	if len(paths) != 1 {
		t.Fatalf("pinned lost counters under %s: %v, want one", pinDir, paths)
	}
	m, err := ebpf.LoadPinnedMap(paths[0], &ebpf.LoadPinOptions{ReadOnly: true})
	must(t, err)
	defer m.Close()
	var l kernelLoss
	for slot := uint32(0); slot < m.MaxEntries(); slot++ {
		var perCPU []uint64
		must(t, m.Lookup(slot, &perCPU))
		for _, v := range perCPU {
			l.all += v
			if collector.EventType(slot) == collector.EventRefused {
				l.refused += v
			}
		}
	}
	return l
}

// kernelLoss is the pinned counter's reserve failures: of every type, and
// of refused records (the slot bpf/drainwatch.h indexes by event type).
type kernelLoss struct{ all, refused uint64 }

func (l kernelLoss) minus(o kernelLoss) kernelLoss {
	return kernelLoss{all: l.all - o.all, refused: l.refused - o.refused}
}

// podNetns is the bind-mounted network namespace of a pod on the first node.
func podNetns(t *testing.T, c *cluster.Cluster, p *corev1.Pod) string {
	t.Helper()
	info, ok := c.Nodes[0].Pod(p.UID)
	if !ok || info.Netns == "" {
		t.Fatalf("the node agent knows no network namespace of pod %s", p.Name)
	}
	return info.Netns
}

// outRsts is the Tcp OutRsts counter of the network namespace at path:
// every RST its kernel sent, delivered or not.
func outRsts(t *testing.T, netns string) int {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+netns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatalf("reading /proc/net/snmp in %s: %v", netns, err)
	}
	n, err := netlab.TCPCounter(out, "OutRsts")
	if err != nil {
		t.Fatalf("%s: %v", netns, err)
	}
	return int(n)
}
