package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// up starts the supervisor in its own session and waits for its one-line
// report on a pipe: "KUBECONFIG=<path>" or "error: ...".
func up(dir string, nodes, realNodes int, prefix string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("up needs root for network namespaces and cgroups: sudo -E go run ./testenv/cmd/testenv up")
	}
	if pid := supervisorPID(dir); pid != 0 {
		return fmt.Errorf("already up (supervisor pid %d); run testenv down first", pid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own binary: %w", err)
	}
	// `go run` deletes its binary when this process exits: keep a copy.
	bin := filepath.Join(dir, "testenv")
	if err := copyFile(self, bin); err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating report pipe: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "supervisor.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("opening supervisor log: %w", err)
	}
	cmd := exec.Command(bin, "supervise", "--dir", dir, "--nodes", strconv.Itoa(nodes),
		"--real-nodes", strconv.Itoa(realNodes), "--node-prefix", prefix)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = logf, logf, []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting supervisor: %w", err)
	}
	w.Close()
	logf.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "KUBECONFIG=") {
		_ = cmd.Wait()
		return fmt.Errorf("cluster did not come up: %s (log: %s)", line, logf.Name())
	}
	_ = cmd.Process.Release()
	fmt.Println(line)
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	return os.Rename(tmp, dst)
}
