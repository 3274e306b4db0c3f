package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is a daemon of the node (containerd, kubelet) with its log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	done    chan struct{}
	err     error
}

// start runs bin in the node namespace (not `ip netns exec`, which also
// unshares the mount namespace and remounts /sys: the kubelet then finds no
// cgroup mounts). It dies with this process (PR_SET_PDEATHSIG).
func (n *Node) start(name, bin string, args ...string) (*proc, error) {
	return n.startEnv(name, nil, bin, args...)
}

// startEnv is start with env added to this process's environment.
func (n *Node) startEnv(name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, logPath: filepath.Join(n.Dir, name+".log"), done: make(chan struct{})}
	log, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.log = log
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.NS.Start(p.cmd); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
