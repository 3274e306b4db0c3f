package realnode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ProbeRefusals counts the kubelet's probes of pod ("namespace/name") at or
// after since that were refused, from the kubelet's own log (--v 2 logs
// every failed probe: "Probe failed" … output="… connect: connection
// refused"): the ground truth for drainwatch's probe_refused, as the
// stand-in's prober log is for its nodes.
func (n *Node) ProbeRefusals(pod string, since time.Time) (int, error) {
	f, err := os.Open(filepath.Join(n.Dir, "kubelet.log"))
	if err != nil {
		return 0, fmt.Errorf("kubelet log: %w", err)
	}
	defer f.Close()
	count := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"Probe failed"`) || !strings.Contains(line, ` pod="`+pod+`" `) ||
			!strings.Contains(line, "connect: connection refused") {
			continue
		}
		at, err := klogTime(line, since.Year())
		if err != nil {
			return 0, err
		}
		if !at.Before(since) {
			count++
		}
	}
	return count, sc.Err()
}

// klogTime is the time of a klog line ("I1130 15:32:13.091730 …", local
// time, no year).
func klogTime(line string, year int) (time.Time, error) {
	if len(line) < 21 {
		return time.Time{}, fmt.Errorf("kubelet log line %q: no klog header", line)
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("kubelet log line %q: %w", line, err)
	}
	return at.AddDate(year, 0, 0), nil
}
