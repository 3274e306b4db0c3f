package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeLogLines returns the last lines of a node's own log that mention a
// pod, for WhyNotReady; nil when the node keeps no such log.
type NodeLogLines func(node, pod string) []string

// whyLines bounds each part of WhyNotReady's explanation.
const whyLines = 8

// WhyNotReady explains, for a person reading a failed scenario, why the
// pods matching selector in ns are not all Ready: for each pod that is
// not, its node and phase, every condition that is not True with its
// reason and message, each container's waiting or terminated state, the
// last lines of its container log (stand-in nodes) and, through nodeLog,
// of its node's own log; then the namespace's last Warning Events and the
// Events of those pods. It never fails: what it cannot read it says.
func (c *Cluster) WhyNotReady(ctx context.Context, ns, selector string, nodeLog NodeLogLines) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var b strings.Builder
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		fmt.Fprintf(&b, "\n  listing pods %s in %s: %v", selector, ns, err)
		return b.String()
	}
	unready := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && podReady(p) {
			continue
		}
		unready[p.Name] = true
		c.describePod(&b, p, nodeLog)
	}
	if len(unready) == 0 {
		fmt.Fprintf(&b, "\n  all %d pods %s in %s are Ready now", len(pods.Items), selector, ns)
	}
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "\n  listing events in %s: %v", ns, err)
		return b.String()
	}
	var picked []corev1.Event
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning || unready[e.InvolvedObject.Name] {
			picked = append(picked, e)
		}
	}
	sort.SliceStable(picked, func(i, j int) bool { return eventTime(&picked[i]).Before(eventTime(&picked[j])) })
	if len(picked) > whyLines*2 {
		picked = picked[len(picked)-whyLines*2:]
	}
	for _, e := range picked {
		fmt.Fprintf(&b, "\n  event %s %s/%s %s: %s (x%d, %s)", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name,
			e.Reason, e.Message, max(e.Count, 1), eventTime(&e).Format(time.TimeOnly))
	}
	return b.String()
}

func (c *Cluster) describePod(b *strings.Builder, p *corev1.Pod, nodeLog NodeLogLines) {
	node := p.Spec.NodeName
	if node == "" {
		node = "(not scheduled)"
	}
	fmt.Fprintf(b, "\n  pod %s on %s: phase %s", p.Name, node, p.Status.Phase)
	if p.DeletionTimestamp != nil {
		b.WriteString(", being deleted")
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			fmt.Fprintf(b, "\n    condition %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			fmt.Fprintf(b, "\n    container %s waiting: %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			fmt.Fprintf(b, "\n    container %s terminated: exit %d %s: %s", cs.Name, cs.State.Terminated.ExitCode,
				cs.State.Terminated.Reason, cs.State.Terminated.Message)
		case !cs.Ready:
			fmt.Fprintf(b, "\n    container %s running, not ready (restarts %d)", cs.Name, cs.RestartCount)
		}
	}
	for _, line := range c.containerLogTail(p) {
		fmt.Fprintf(b, "\n    log: %s", line)
	}
	if nodeLog != nil && p.Spec.NodeName != "" {
		for _, line := range nodeLog(p.Spec.NodeName, p.Name) {
			fmt.Fprintf(b, "\n    node %s: %s", p.Spec.NodeName, line)
		}
	}
}

// containerLogTail is the end of the pod's newest container log on a
// stand-in node (its agent's LogDir); nil on other nodes.
func (c *Cluster) containerLogTail(p *corev1.Pod) []string {
	for _, a := range c.Nodes {
		if a.Name() != p.Spec.NodeName {
			continue
		}
		logs, _ := filepath.Glob(filepath.Join(a.LogDir(), fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "*", "*.log"))
		if len(logs) == 0 {
			return nil
		}
		sort.Strings(logs)
		return TailMatching(logs[len(logs)-1], "", whyLines)
	}
	return nil
}

// TailMatching returns the last n lines of the file at path that contain
// substr (every line when substr is empty), nil when it cannot be read.
func TailMatching(path, substr string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, substr) {
			lines = append(lines, line)
			if len(lines) > n {
				lines = lines[1:]
			}
		}
	}
	return lines
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
