package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// state is what the supervisor writes once the cluster is up.
type state struct {
	PID        int      `json:"pid"`
	Kubeconfig string   `json:"kubeconfig"`
	URL        string   `json:"url"`
	Nodes      []string `json:"nodes"`
	Fabric     string   `json:"fabric"`
	Log        string   `json:"log"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }
func pidPath(dir string) string   { return filepath.Join(dir, "supervisor.pid") }

func writeState(dir string, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	return os.WriteFile(statePath(dir), b, 0o644)
}

func readState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(statePath(dir))
	if os.IsNotExist(err) {
		return s, errNotUp
	}
	if err != nil {
		return s, fmt.Errorf("reading state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decoding %s: %w", statePath(dir), err)
	}
	return s, nil
}

// supervisorPID returns the running supervisor's pid, or 0.
func supervisorPID(dir string) int {
	var pid int
	b, err := os.ReadFile(pidPath(dir))
	if err != nil {
		return 0
	}
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 0 {
		return 0
	}
	if !alive(pid) {
		return 0
	}
	return pid
}

// alive reports whether pid is a live (not zombie) testenv supervisor: a pid
// file can outlive its process and the pid be reused.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), "supervise")
}
