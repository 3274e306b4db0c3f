package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/l7"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// meshProxyPort is the sidecar's inbound port, Istio's: the pod's iptables
// REDIRECT sends every connection to the application's port there.
const meshProxyPort = 15006

// meshCase is one stop order of a pod with a sidecar proxy: which
// container sleeps in its preStop while the other stops at once.
type meshCase struct {
	name, ns string
	// proxySleep and appSleep are the containers' preStop sleeps (0:
	// none).
	proxySleep, appSleep int64
	// native runs the proxy as a native sidecar (an init container with
	// restartPolicy Always), which the kubelet stops after the server.
	native bool
}

var (
	// The proxy stops first: its listener closes at its stop signal, the
	// application behind it still sleeping in its preStop.
	meshProxyFirst = meshCase{"mesh/proxy-first", "lab-mesh-proxy-first", 0, 3, false}
	// The application stops first: the proxy, sleeping in its preStop,
	// still forwards to it.
	meshAppFirst = meshCase{"mesh/app-first", "lab-mesh-app-first", 2, 0, false}
	// The proxy as a native sidecar, neither sleeping: the kubelet stops
	// it only once the server has exited, so the server stops first by
	// design.
	meshNativeSidecar = meshCase{"mesh/native-sidecar", "lab-mesh-native", 0, 0, true}
)

// meshScenario runs the seeds' clients at a pod built the way a mesh
// builds one: container proxy (Debian's haproxy; its image's STOPSIGNAL
// SIGUSR1, the soft stop) first installs the real iptables REDIRECT of
// port 8080 to 15006 in the pod's namespace, as istio-init does (the
// stand-in node runs no init containers, so the proxy's command does it),
// then forwards to container server (the seeds' naive server) over
// loopback, without retries, as a mesh's inbound listener does (Istio's
// inbound cluster does not retry; the caller's sidecar would). The clients
// and the kubelet's readiness probe go to the pod's port 8080 and meet the
// proxy. Which container stops first is the case's.
func meshScenario(c meshCase) func(context.Context, *Lab) ([]Result, error) {
	return func(ctx context.Context, l *Lab) ([]Result, error) {
		r, err := l.mesh(ctx, c)
		if err != nil {
			return nil, err
		}
		return []Result{r}, nil
	}
}

func (l *Lab) mesh(ctx context.Context, c meshCase) (Result, error) {
	dir, err := os.MkdirTemp(l.clusterDir, "mesh-")
	if err != nil {
		return Result{}, fmt.Errorf("mesh directory: %w", err)
	}
	conf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(meshHAProxyConfig()), 0o644); err != nil {
		return Result{}, fmt.Errorf("sidecar config: %w", err)
	}
	dep := cluster.ServerDeployment(c.ns, "web", workload.ModeNaive, 1)
	spec := &dep.Spec.Template.Spec
	app := &spec.Containers[0]
	redirect := fmt.Sprintf("iptables -t nat -A PREROUTING -p tcp --dport %d -j REDIRECT --to-ports %d && exec haproxy -db -f %s",
		cluster.ServerPort, meshProxyPort, conf)
	proxy := corev1.Container{Name: "proxy", Image: "haproxy", Command: []string{"sh", "-c", redirect},
		Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: meshProxyPort}}}
	if c.proxySleep > 0 {
		proxy.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: c.proxySleep}}}
	}
	if c.appSleep > 0 {
		app.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: c.appSleep}}}
	}
	spec.Containers = []corev1.Container{proxy, *app}
	if c.native {
		always := corev1.ContainerRestartPolicyAlways
		proxy.RestartPolicy = &always
		spec.InitContainers, spec.Containers = []corev1.Container{proxy}, []corev1.Container{*app}
	}
	containers := len(spec.InitContainers) + len(spec.Containers)
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return Result{}, errorf("deploying", err)
	}
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)
	l.progress.Step("%s: pod %s on %s at %s (proxy :%d in front of server :%d, preStop sleeps proxy %d s, server %d s): /slow in flight, delete, then /work every 20 ms and /ready every 50 ms for 1 s",
		c.name, pod.Name, pod.Spec.NodeName, addr, meshProxyPort, cluster.ServerPort, c.proxySleep, c.appSleep)
	res, err := l.Cluster.SeedsAt(ctx, pod, addr, addr)
	if err != nil {
		return Result{}, errorf("seeds' clients", err)
	}
	death, err := l.allExited(ctx, pod, containers)
	if err != nil {
		return Result{}, errorf("node agent", err)
	}
	l.progress.Step("%s: clients done, both containers exited; waiting for drainwatch's termination to be complete", c.name)
	vs, err := l.WaitComplete(ctx, c.ns, string(pod.UID))
	if err != nil {
		return Result{}, err
	}
	probes, err := l.Cluster.ProbeRefusals(pod, res.StopAt)
	if err != nil {
		return Result{}, errorf("kubelet prober", err)
	}
	logged, err := l7.ParseHAProxyLog(l.containerLog(pod, "proxy"))
	if err != nil {
		return Result{}, errorf("the sidecar's log", err)
	}
	backend := logged.Backends[net.JoinHostPort("127.0.0.1", strconv.Itoa(cluster.ServerPort))]
	all := [][]client.Request{res.Work, res.Readiness, {res.Slow}}
	text := l.timelineCLI(ctx, c.ns, vs)
	l.progress.Block(sideBySide("clients (0 = the delete)", res.Timeline(), "drainwatch timeline (0 = the stop signal)", text, 50))
	l.record(c.name, c.ns, vs, text, res)
	v := vs[0]
	return Result{
		Name: c.name, Namespace: c.ns, Source: "api", Diagnoses: diagnosisCodes(vs...),
		ClientRefused: RefusedTo(addr, all...), DrainwatchRefused: v.Counts.RefusedAfterSigterm,
		ClientKilled: KilledBy(addr, death, all...), DrainwatchKilled: v.Counts.RequestsKilledBySigkill,
		ProberProbeRefused: probes, DrainwatchProbeRefused: v.Counts.ProbeRefused,
		ClientResetAtShutdown: ResetAtShutdownTo(addr, death, all...), DrainwatchResetAtShutdown: v.Counts.ConnectionsResetAtShutdown,
		ClientBlackholed: BlackholedTo(addr, all...), DrainwatchBlackholed: v.Counts.ConnectionsBlackholed,
		ProxyRefusedInside: backend.Refused, DrainwatchRefusedInside: v.Counts.RefusedInsidePod,
		Note: fmt.Sprintf("/work %s; /ready %s; /slow %s; the sidecar logged %d requests, %d answered 503 (%d of them the clients'); %s; %s",
			client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, logged.Requests, logged.Status[503],
			statusTo(addr, 503, all...), meshListenerNote(v), meshFixNote(v)),
	}, nil
}

// meshHAProxyConfig is the sidecar's config: the inbound listener on every
// address of the pod, the application over loopback, no retries, the
// request log on stdout (the container's log) in testenv/l7's format.
func meshHAProxyConfig() string {
	return fmt.Sprintf(`global
  maxconn 1024
  log stdout format raw local0

defaults
  mode http
  log global
  option dontlognull
  log-format "%s"
  retries 0
  retry-on none
  timeout connect 1s
  timeout client 30s
  timeout server 30s

frontend inbound
  bind 0.0.0.0:%d
  default_backend app

backend app
  server app 127.0.0.1:%d
`, l7.HAProxyLogFormat, meshProxyPort, cluster.ServerPort)
}

// allExited waits until the node agent has stopped every one of the pod's
// n containers and returns the pod's death: its latest SIGKILL, if any, and
// its last exit.
func (l *Lab) allExited(ctx context.Context, pod *corev1.Pod, n int) (Death, error) {
	for {
		ts := l.Cluster.Terminations(pod.UID)
		var d Death
		exited := 0
		for _, t := range ts {
			if t.ExitAt.IsZero() {
				continue
			}
			exited++
			if t.ExitAt.After(d.Exit) {
				d.Exit = t.ExitAt
			}
			if t.SIGKILLAt.After(d.SIGKILL) {
				d.SIGKILL = t.SIGKILLAt
			}
		}
		if exited >= n {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return Death{}, fmt.Errorf("%d of pod %s's %d containers exited: %w", exited, pod.Name, n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// containerLog is the path of a container's first log on its stand-in
// node (the agents' LogDir, cluster.go).
func (l *Lab) containerLog(pod *corev1.Pod, container string) string {
	return filepath.Join(l.Cluster.Dir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container, "0.log")
}

// statusTo counts the requests to target answered with status.
func statusTo(target string, status int, runs ...[]client.Request) int {
	n := 0
	for _, run := range runs {
		for _, r := range run {
			if r.Target == target && r.Status == status {
				n++
			}
		}
	}
	return n
}

// meshListenerNote says whose listener drainwatch's listener_closed is and
// lists the pod's listener closes.
func meshListenerNote(v exporter.TerminationView) string {
	note := "listener_closed: no container named"
	if s, ok := v.ServingListener(); ok {
		note = fmt.Sprintf("listener_closed: container %s :%d", s.Container, s.Port)
	}
	for _, c := range v.Listeners {
		inner := ""
		if c.Inner {
			inner = " inside"
		}
		note += fmt.Sprintf(", closed %s :%d%s %+.3fs", c.Container, c.Port, inner, c.At.Sub(v.Marks.StopSignal).Seconds())
	}
	return note
}

// meshFixNote is the fix of the diagnosis that names a container.
func meshFixNote(v exporter.TerminationView) string {
	for _, d := range v.Diagnoses {
		if d.Code == correlate.DiagListenerClosedEarly || d.Code == correlate.DiagRefusedInsidePod {
			return d.Code + " fix: " + d.Fix
		}
	}
	return "no diagnosis names a container"
}
