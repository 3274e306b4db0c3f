package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/testenv/cluster"
)

// notStarted is a scenario's Deployment that never rolled out. Why is the
// explanation a person needs (cluster.WhyNotReady: the pods' conditions and
// container states, their logs and Events, the real node's kubelet lines);
// Error is one line, for the final table.
type notStarted struct {
	err error
	Why string
}

func (e *notStarted) Error() string {
	if r := firstReason(e.Why); r != "" {
		return e.err.Error() + "; " + r
	}
	return e.err.Error()
}

func (e *notStarted) Unwrap() error { return e.err }

// firstReason is the first line of why that names a cause: a container's
// state, else a condition, else an event.
func firstReason(why string) string {
	lines := strings.Split(why, "\n")
	for _, prefix := range []string{"container ", "condition ", "event "} {
		for _, line := range lines {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, prefix) {
				return line
			}
		}
	}
	return ""
}

// waitRolledOut waits for the Deployment as cluster.WaitRolledOut does;
// when it never rolls out, the error says why.
func (l *Lab) waitRolledOut(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	d, err := l.Cluster.WaitRolledOut(ctx, ns, name)
	if err != nil {
		return d, l.whyNotStarted(ctx, ns, name, err)
	}
	return d, nil
}

// whyNotStarted wraps err, a Deployment app of ns that is not ready, with
// why its pods are not.
func (l *Lab) whyNotStarted(ctx context.Context, ns, app string, err error) error {
	why := l.Cluster.WhyNotReady(ctx, ns, "app="+app, l.nodeLogLines)
	return &notStarted{err: err, Why: why}
}

// nodeLogLines are the real node's last kubelet log lines about a pod;
// the stand-ins' agents log to the lab's own log (cluster.WhyNotReady adds
// their pods' container logs).
func (l *Lab) nodeLogLines(node, pod string) []string {
	if l.RealNode == nil || node != l.RealNode.Name {
		return nil
	}
	return cluster.TailMatching(filepath.Join(l.RealNode.Dir, "kubelet.log"), pod, 5)
}

// printWhy shows why a failed scenario's pods never became Ready, when that
// is why it failed.
func (l *Lab) printWhy(name string, err error) string {
	var ns *notStarted
	if !errors.As(err, &ns) {
		return ""
	}
	l.progress.Block(fmt.Sprintf("why %s could not start:%s", name, ns.Why))
	return strings.TrimPrefix(ns.Why, "\n")
}
