package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// scenarioTimeout bounds one scenario (the rolling update is the longest).
const scenarioTimeout = 4 * time.Minute

// Scenario is one of the lab's scenarios; it may report several rows (the
// rolling update reports one per revision).
type Scenario struct {
	Name  string
	About string // one line: what the scenario shows
	Run   func(ctx context.Context, l *Lab) ([]Result, error)
}

// realNodePrefix names the scenarios that run on the real node: only with
// Config.RealNode.
const realNodePrefix = "real/"

// Scenarios are issue 6's scenarios, in the order the lab runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{"seeds/naive", "the seeds' naive server: the listener closes at SIGTERM while traffic still comes", seedsScenario(seedsNaive)},
		{"seeds/protocol-1.5s", "the protocol: /ready 503 at SIGTERM, still serving 1.5 s, then drain", seedsScenario(seedsProtocol)},
		{"seeds/protocol-0s", "the protocol without its delay: right order, no window, same refusals", seedsScenario(seedsProtocolNoDelay)},
		{"rollout", "a rolling update behind a router 1.5 s late without preStop, then the patch drainwatch advise prints applied with kubectl, and the next rollout", rolloutScenario},
		{"ignore-term", "a shell as PID 1 ignores SIGTERM: SIGKILL cuts the requests in flight", ignoreTermScenario},
		{"prestop-fails", "a preStop exec of a missing binary: FailedPreStopHook, then SIGTERM at once", prestopFailsScenario},
		{"nginx-sigquit", "Debian's nginx, its image's STOPSIGNAL SIGQUIT, none in the API, probes on: the seeds straight at the pod", nginxScenario},
		{"real/seeds-naive", "the seeds' naive server on the real node: the real kubelet deletes it, containerd's shim sends SIGTERM", realSeedsScenario},
		{"kube-proxy/naive", "the seeds' naive server behind a ClusterIP Service on the real kube-proxy (nftables, minSyncPeriod 1 s)", kubeProxyScenario(kubeProxyNaive)},
		{"kube-proxy/protocol-1.5s", "the protocol (drain delay 1.5 s) behind the same Service", kubeProxyScenario(kubeProxyProtocol)},
		{"l7/nginx", "a rollout behind Debian's nginx pooling keep-alive connections longer than the pods keep them", l7Scenario(l7Nginx)},
		{"l7/haproxy", "the same behind Debian's haproxy", l7Scenario(l7HAProxy)},
		{"l7/nginx-fix", "the same behind nginx, the pods' idle timeout longer than the pool", l7Scenario(l7NginxFixed)},
		{"stop/liveness-restart", "a failed liveness probe restarts a naive server draining 4 s /slow: no deletion, the pod stays in its Service", livenessScenario},
		{"stop/node-pressure-eviction", "the kubelet evicts a naive server under memory pressure: no deletion, its endpoint still ready", evictionScenario},
		{"stop/node-shutdown", "graceful node shutdown stops three naive servers of one node at once (grace 10 s): no deletion", nodeShutdownScenario},
		{"stop/oom-kill", "the kernel's OOM killer kills a server (memory limit 64Mi) with 4 requests in flight; the kubelet restarts it", oomScenario},
		{exitGoNoHandler.name, exitGoNoHandler.about, exitScenario(exitGoNoHandler)},
		{exitGoShutdownShort.name, exitGoShutdownShort.about, exitScenario(exitGoShutdownShort)},
		{exitNodeTini.name, exitNodeTini.about, exitScenario(exitNodeTini)},
		{"ipv6/seeds-naive", "the seeds' naive server of a dual-stack pod, its clients at its IPv6 address", seedsScenario(seedsNaiveIPv6)},
		{"ipv6/ignore-term", "ignore-term with the clients at the dual-stack pod's IPv6 address: killed, then blackholed at that address", ignoreTermIPv6Scenario},
		{meshProxyFirst.name, "a mesh's pod: haproxy in front of the naive server over loopback (the real iptables REDIRECT of 8080 to 15006), the proxy stopping first, the server sleeping 3 s in its preStop", meshScenario(meshProxyFirst)},
		{meshAppFirst.name, "the same pod, the server stopping first while the proxy sleeps 2 s in its preStop and still forwards to it", meshScenario(meshAppFirst)},
		{meshNativeSidecar.name, "the same with the proxy as a native sidecar (an init container with restartPolicy Always): the node stops it once the server has exited", meshScenario(meshNativeSidecar)},
		{"startup/ready-before-listening", "a new pod whose tcpSocket readiness probe targets a health port open at once, its traffic port 5 s after the start: clients straight at the pod", startupScenario},
		{"startup/resets-after-ready", "a new pod Ready by the same probe while its server resets every request for 5.5 s after the start (a warm-up): clients straight at the pod, a request per connection", startupResetsScenario},
	}
}

// Selected returns the scenarios whose name starts with one of prefixes
// (all of them when prefixes is empty).
func Selected(prefixes []string) []Scenario {
	var out []Scenario
	for _, s := range Scenarios() {
		if len(prefixes) == 0 || hasPrefix(s.Name, prefixes) {
			out = append(out, s)
		}
	}
	return out
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Run starts a lab, runs the selected scenarios, writes the results
// directory and stops everything. The results are returned even when
// something failed after the scenarios ran.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	l, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	results := l.RunScenarios(ctx)
	var checks *PromChecks
	var otlpCheck OTLPCheck
	if ctx.Err() == nil {
		l.checkPrometheus(ctx, results)
		checks = l.checkAlertsAndDashboard(ctx, results)
		otlpCheck = l.checkOTLP(ctx)
		l.progress.Step("%s", otlpCheck.Result)
	}
	// The results are written even after an interrupt, within their own
	// bound.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	werr := l.WriteResults(wctx, results, checks)
	return results, errors.Join(checks.err(), otlpCheck.err(), werr, l.Stop())
}

// RunScenarios runs the configured scenarios one after the other; a
// scenario that fails becomes a row with its error.
func (l *Lab) RunScenarios(ctx context.Context) []Result {
	var results []Result
	for _, s := range Selected(l.cfg.Scenarios) {
		if strings.HasPrefix(s.Name, realNodePrefix) && l.RealNode == nil {
			continue
		}
		if ctx.Err() != nil {
			l.progress.Step("interrupted: scenario %s and those after it not run", s.Name)
			break
		}
		l.progress.Step("scenario %s: %s", s.Name, s.About)
		sctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
		rs, err := s.Run(sctx, l)
		cancel()
		if err != nil {
			l.progress.Step("scenario %s failed: %v", s.Name, err)
			why := l.printWhy(s.Name, err)
			rs = append(rs, Result{Name: s.Name, Error: err.Error(), NotStarted: why, Diagnoses: []string{}})
		}
		for _, r := range rs {
			l.progress.Step("%s: refused %d/%d, killed %d/%d, killed at exit %d/%d, probe refused %d/%d, reset at shutdown %d/%d (ground truth/drainwatch) %v",
				r.Name, r.ClientRefused, r.DrainwatchRefused, r.ClientKilled, r.DrainwatchKilled, r.ClientKilledAtExit, r.DrainwatchKilledAtExit, r.ProberProbeRefused,
				r.DrainwatchProbeRefused, r.ClientResetAtShutdown, r.DrainwatchResetAtShutdown, r.Diagnoses)
		}
		results = append(results, rs...)
	}
	return results
}

// record keeps a scenario's timelines and client logs for the results.
func (l *Lab) record(name, ns string, tl []exporter.TerminationView, text string, clients any) {
	l.runs = append(l.runs, scenarioRun{Name: name, Namespace: ns, Timelines: tl, Text: text, ClientLogs: clients})
}

func nonEmpty(s []promtest.Sample) bool { return len(s) > 0 }

// errorf wraps an error with the scenario step that failed.
func errorf(step string, err error) error { return fmt.Errorf("%s: %w", step, err) }
