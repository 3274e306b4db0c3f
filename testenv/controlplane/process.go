package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// process is one control-plane component running as a child process. It dies
// with its parent (Pdeathsig), so a crashed test leaves nothing behind.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProcess runs bin with args, its output appended to <dir>/<name>.log.
func startProcess(log zerolog.Logger, dir, name, bin string, args []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := StartFromKeeper(cmd); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	log.Debug().Str("component", name).Int("pid", cmd.Process.Pid).Str("log", logPath).Msg("started")
	return p, nil
}

// exited reports whether the process has ended, with its error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after grace (at once when grace is 0),
// and waits for the exit.
func (p *process) stop(grace time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	if grace == 0 {
		_ = p.cmd.Process.Kill()
		<-p.done
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil
}

// Pdeathsig fires when the thread that forked the child exits, not the
// process (golang/go#27505). Go ends a thread when a goroutine exits while
// locked to it, which namespace helpers do on purpose after a failed setns.
// Children are therefore forked from one keeper thread that never exits;
// StartFromKeeper starts cmd there (testenv's other real parts use it too).
var keeper struct {
	once sync.Once
	reqs chan keeperReq
}

type keeperReq struct {
	cmd  *exec.Cmd
	done chan error
}

func StartFromKeeper(cmd *exec.Cmd) error {
	keeper.once.Do(func() {
		keeper.reqs = make(chan keeperReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range keeper.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	keeper.reqs <- keeperReq{cmd: cmd, done: done}
	return <-done
}
