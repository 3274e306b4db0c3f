package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/node"
)

// status prints the supervisor, the API server and the nodes.
func status(dir string) error {
	s, err := readState(dir)
	if err != nil {
		return err
	}
	pid := supervisorPID(dir)
	if pid == 0 {
		return fmt.Errorf("supervisor %d is gone; run testenv down to clean up", s.PID)
	}
	fmt.Printf("supervisor pid %d, log %s\nKUBECONFIG=%s\napiserver %s\nfabric netns %s\n", pid, s.Log, s.Kubeconfig, s.URL, s.Fabric)
	rc, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("apiserver not answering: %w", err)
	}
	for _, n := range nodes.Items {
		ready := "NotReady"
		for _, cond := range n.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready = "Ready"
			}
		}
		fmt.Printf("node %s %s podCIDR %s\n", n.Name, ready, n.Spec.PodCIDR)
	}
	return nil
}

// down stops the supervisor, which tears the cluster down. When the
// supervisor was gone already or had to be killed, down sweeps what it left
// (the fabric and the nodes' namespaces and empty pod cgroups, by name); then
// it deletes the state directory.
func down(dir string) error {
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return errNotUp
	}
	s, stateErr := readState(dir)
	clean := false
	if pid := supervisorPID(dir); pid != 0 {
		var err error
		if clean, err = stopPID(pid, time.Minute); err != nil {
			return err
		}
	}
	if !clean && stateErr == nil {
		if err := sweep(s); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	fmt.Println("testenv down; removed", filepath.Clean(dir))
	return nil
}

func sweep(s state) error {
	removed, err := netlab.RemoveAll(strings.TrimPrefix(s.Fabric, netlab.Prefix))
	if err != nil {
		return fmt.Errorf("removing fabric namespace: %w", err)
	}
	for _, n := range s.Nodes {
		names, err := node.Sweep(n)
		removed = append(removed, names...)
		if err != nil {
			return fmt.Errorf("sweeping node %s: %w", n, err)
		}
	}
	fmt.Println("swept leftovers:", strings.Join(removed, " "))
	return nil
}

// stopPID sends SIGTERM and waits; after grace it kills. It reports whether
// the process ended by itself.
func stopPID(pid int, grace time.Duration) (bool, error) {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return false, fmt.Errorf("signalling supervisor %d: %w", pid, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(500 * time.Millisecond)
	return false, nil
}
