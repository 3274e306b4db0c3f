// Package runtime runs drainwatch's image under Debian's containerd and runc,
// the way a kubelet's CRI would: a private containerd (its own root, state and
// socket under a temporary directory, the CRI plugin off, no CNI) driven with
// ctr, and the DaemonSet's security context turned into ctr flags (Flags).
package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Namespace is the containerd namespace the images and containers live in.
const Namespace = "drainwatch-test"

// Containerd is a containerd daemon started for one test run.
type Containerd struct {
	Dir    string // root of its root, state, socket and log
	Socket string
	cmd    *exec.Cmd
	log    *os.File
}

// config keeps every path of containerd under dir; the CRI plugin (which
// wants CNI and a pause image) is disabled: containers run through ctr.
const config = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
`

// StartContainerd starts containerd under dir (keep it short: the socket
// path must fit in 108 bytes) and waits until ctr answers.
func StartContainerd(ctx context.Context, dir string) (*Containerd, error) {
	c := &Containerd{Dir: dir, Socket: filepath.Join(dir, "c.sock")}
	cfg := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf(config, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.Socket, c.Socket+".ttrpc", filepath.Join(dir, "opt"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		return nil, err
	}
	c.log = log
	c.cmd = exec.Command("containerd", "--config", cfg)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting containerd: %w", err)
	}
	for i := 0; i < 100; i++ { // 10 s
		if _, err := c.Ctr(ctx, "version"); err == nil {
			return c, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Stop()
	return nil, fmt.Errorf("containerd did not answer on %s within 10s (log %s)", c.Socket, log.Name())
}

// Ctr runs ctr against this containerd in Namespace.
func (c *Containerd) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := c.CtrCommand(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("ctr %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// CtrCommand is the ctr command, for a caller that streams its output.
func (c *Containerd) CtrCommand(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ctr", append([]string{"--address", c.Socket, "--namespace", Namespace}, args...)...)
}

// Stop kills every task left, stops containerd and waits for it.
func (c *Containerd) Stop() error {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	return c.log.Close()
}
