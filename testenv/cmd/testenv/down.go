package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/node"
)

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
