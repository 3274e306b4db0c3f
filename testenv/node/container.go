package node

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// container is one run of a container: its init process (PID 1 of a new PID
// namespace) in its own cgroup scope.
type container struct {
	spec      corev1.Container
	image     Image // the image config: its stop signal
	id        string
	scope     string // absolute cgroup path
	cgroupID  uint64
	pid       int
	proc      *os.Process
	logPath   string
	restarts  int32
	startedAt time.Time
	exited    chan struct{} // closed once exitCode and finishedAt are set
	exitCode  int32
	finished  time.Time
	// memCgroup is the v1 memory cgroup of a container with a memory
	// limit (memlimit.go); oomKilled, set at the exit, says the kernel's
	// OOM killer killed a process of it.
	memCgroup string
	oomKilled bool
}

func newContainerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startContainer runs the container's init as PID 1 of a new PID namespace,
// inside the pod's network namespace, born in its cgroup scope.
func (a *Agent) startContainer(pod *corev1.Pod, sb *sandbox, spec corev1.Container, restarts int32) (*container, error) {
	path, argv, img, err := resolveArgv(&spec, a.images)
	if err != nil {
		return nil, err
	}
	c := &container{spec: spec, image: img, id: newContainerID(), restarts: restarts, exited: make(chan struct{})}
	c.scope = filepath.Join(sb.slice, "cri-containerd-"+c.id+".scope")
	cg, err := makeCgroup(c.scope)
	if err != nil {
		return nil, err
	}
	defer cg.Close()
	c.cgroupID = inode(c.scope)
	logFile, err := a.openLog(pod, spec.Name, restarts)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	c.logPath = logFile.Name()
	cmd := &exec.Cmd{Path: path, Args: argv, Env: containerEnv(pod, sb, &spec), Dir: spec.WorkingDir,
		Stdout: logFile, Stderr: logFile}
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID, UseCgroupFD: true, CgroupFD: int(cg.Fd()), Pdeathsig: syscall.SIGKILL,
	}
	if err := sb.ns.Start(cmd); err != nil {
		_ = removeCgroup(c.scope)
		return nil, fmt.Errorf("starting container %s: %w", spec.Name, err)
	}
	c.proc, c.pid, c.startedAt = cmd.Process, cmd.Process.Pid, time.Now()
	if limit := spec.Resources.Limits.Memory(); !limit.IsZero() {
		c.memCgroup = memoryCgroup(c.scope, a.cfg.CgroupRoot)
		if err := limitMemory(c.memCgroup, c.pid, limit.Value()); err != nil {
			_ = c.proc.Kill()
			_ = cmd.Wait()
			_ = removeCgroup(c.scope)
			removeMemoryCgroup(c.memCgroup)
			return nil, fmt.Errorf("container %s: %w", spec.Name, err)
		}
	}
	go c.wait(cmd)
	return c, nil
}

func (c *container) wait(cmd *exec.Cmd) {
	_ = cmd.Wait()
	c.finished = time.Now()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		c.exitCode = ExitCode(ws)
	}
	if c.memCgroup != "" {
		c.oomKilled = oomKilled(c.memCgroup)
		removeMemoryCgroup(c.memCgroup)
	}
	close(c.exited)
}

func (c *container) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (a *Agent) openLog(pod *corev1.Pod, name string, restarts int32) (*os.File, error) {
	dir := filepath.Join(a.cfg.LogDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating log dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.log", restarts)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening container log: %w", err)
	}
	return f, nil
}

// containerEnv is the process environment: a default PATH, HOSTNAME, and
// the container's env values (fieldRefs to the pod's name, namespace, UID
// and IPs are resolved; other sources are not supported).
func containerEnv(pod *corev1.Pod, sb *sandbox, spec *corev1.Container) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + pod.Name}
	fields := map[string]string{"metadata.name": pod.Name, "metadata.namespace": pod.Namespace,
		"metadata.uid": string(pod.UID), "status.podIP": sb.IP, "spec.nodeName": pod.Spec.NodeName}
	for _, e := range spec.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = fields[e.ValueFrom.FieldRef.FieldPath]
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}
