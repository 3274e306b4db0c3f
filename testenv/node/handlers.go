package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// handler is a lifecycle hook's action, or an exec probe's. (tcpSocket and
// httpGet probes go through the kubelet prober process.)
type handler struct {
	Exec      *corev1.ExecAction
	HTTPGet   *corev1.HTTPGetAction
	TCPSocket *corev1.TCPSocketAction
	Sleep     *corev1.SleepAction
}

// run executes the handler against container c of a pod whose address is
// podIP. exec runs inside the container's PID and network namespaces and its
// cgroup; httpGet and tcpSocket connect from the agent, in the node's
// namespace.
func (a *Agent) runHandler(ctx context.Context, h handler, c *container, podIP string) error {
	switch {
	case h.Exec != nil:
		return a.execInContainer(ctx, c, h.Exec.Command)
	case h.HTTPGet != nil:
		return a.httpGet(ctx, h.HTTPGet, c, podIP)
	case h.TCPSocket != nil:
		port, err := resolvePort(h.TCPSocket.Port, &c.spec)
		if err != nil {
			return err
		}
		conn, err := a.nodeNS.Dial(ctx, "tcp", net.JoinHostPort(hostOr(h.TCPSocket.Host, podIP), strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("container %s: handler has no supported action", c.spec.Name)
}

// execInContainer runs argv with nsenter in the namespaces of the
// container's init, placed in the container's cgroup like a CRI exec.
func (a *Agent) execInContainer(ctx context.Context, c *container, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec: empty command")
	}
	cg, err := os.Open(c.scope)
	if err != nil {
		return fmt.Errorf("exec: container cgroup: %w", err)
	}
	defer cg.Close()
	args := append([]string{"--target", strconv.Itoa(c.pid), "--pid", "--net", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd()), Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &execError{argv: argv, err: err, output: string(bytes.TrimSpace(out.Bytes()))}
	}
	return nil
}

// execError is a failed exec; a probe event shows only its output, like
// the kubelet's "Liveness probe failed: <output>".
type execError struct {
	argv   []string
	err    error
	output string
}

func (e *execError) Error() string {
	return fmt.Sprintf("exec %q: %v: %s", strings.Join(e.argv, " "), e.err, e.output)
}

func (e *execError) Unwrap() error { return e.err }

// httpGet is a preStop httpGet: the status is ignored, like the kubelet's
// lifecycle handler does.
func (a *Agent) httpGet(ctx context.Context, g *corev1.HTTPGetAction, c *container, podIP string) error {
	port, err := resolvePort(g.Port, &c.spec)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(hostOr(g.Host, podIP), strconv.Itoa(port)), g.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("httpGet %s: %w", url, err)
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	client := &http.Client{Transport: &http.Transport{DialContext: a.nodeNS.DialContext, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	return nil
}

// resolvePort resolves a numeric or named container port.
func resolvePort(p intstr.IntOrString, spec *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", spec.Name, p.StrVal)
}

func hostOr(host, podIP string) string {
	if host != "" {
		return host
	}
	return podIP
}
