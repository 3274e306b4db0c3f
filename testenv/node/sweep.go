package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// Namespace names: netlab.Prefix + "node-<node>-<6 hex>" for a node and
// netlab.Prefix + "pod-<node>_<pod>-<6 hex>" for its pods. Node and pod
// names never contain "_", so a sweep finds exactly one node's namespaces
// (node "a" does not sweep node "a-b").
func nodeNSName(node string) string     { return "node-" + node }
func podNSName(node, pod string) string { return "pod-" + node + "_" + pod }

// Sweep removes what an agent for the node named node left behind when its
// process died without Stop (SIGKILL, crash): the node's and its pods'
// network namespaces, and empty pod cgroups older than a minute. Container
// processes are not looked for: PR_SET_PDEATHSIG killed them with the agent.
// Do not sweep a node whose agent is running.
func Sweep(node string) ([]string, error) {
	nodeNS := regexp.MustCompile("^" + regexp.QuoteMeta(netlab.Prefix+nodeNSName(node)) + "-[0-9a-f]{6}$")
	podPrefix := netlab.Prefix + podNSName(node, "")
	removed, err := netlab.RemoveIf(func(name string) bool {
		return nodeNS.MatchString(name) || strings.HasPrefix(name, podPrefix)
	})
	if err != nil {
		return removed, err
	}
	root, err := Cgroup2Mount()
	if err != nil {
		return removed, err
	}
	cgs, err := SweepCgroups(root, time.Minute)
	return append(removed, cgs...), err
}

// SweepCgroups removes pod slices under <root>/kubepods.slice that have no
// process left and were created more than minAge ago (so a pod another
// agent is setting up right now is spared), with their container scopes.
func SweepCgroups(root string, minAge time.Duration) ([]string, error) {
	var slices []string
	for _, pattern := range []string{"kubepods-pod*.slice", "kubepods-*.slice/kubepods-*-pod*.slice"} {
		m, err := filepath.Glob(filepath.Join(root, kubepodsSlice, pattern))
		if err != nil {
			return nil, fmt.Errorf("globbing cgroups: %w", err)
		}
		slices = append(slices, m...)
	}
	var removed []string
	var errs []error
	for _, slice := range slices {
		st, err := os.Stat(slice)
		if err != nil || populated(slice) || time.Since(st.ModTime()) < minAge {
			continue
		}
		scopes, _ := filepath.Glob(filepath.Join(slice, "*.scope"))
		for _, p := range append(scopes, slice) {
			if err := removeCgroup(p); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, strings.TrimPrefix(p, root+"/"))
		}
	}
	return removed, errors.Join(errs...)
}
