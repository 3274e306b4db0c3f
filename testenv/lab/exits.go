package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// exitSlow is how many /slow requests are in flight when an exit/ server
// is deleted: each of them is lost when it dies.
const exitSlow = 4

// exitServer is an exit/ scenario's server: one that dies with requests in
// flight and no SIGKILL (the grace period, 30 s, outlasts all of them).
type exitServer struct {
	name, about string
	deployment  func(l *Lab, ns string) (*appsv1.Deployment, error)
}

var (
	// Go's runtime, with no signal.Notify, exits at SIGTERM (status 2 as
	// the container's PID 1: the default action it re-raises is dropped).
	exitGoNoHandler = exitServer{"exit/go-no-handler", "a Go net/http server that never calls signal.Notify, 4 /slow in flight",
		func(_ *Lab, ns string) (*appsv1.Deployment, error) {
			return cluster.ServerDeployment(ns, "web", workload.ModeNoHandler, 1), nil
		}}
	// Seed 003's pattern with its timeout too short: Shutdown gives up
	// after 1 s, main returns, the exit cuts the requests still served.
	exitGoShutdownShort = exitServer{"exit/go-shutdown-short", "a Go server whose Shutdown timeout (1 s) is shorter than its 20 s /slow",
		func(_ *Lab, ns string) (*appsv1.Deployment, error) {
			return cluster.ServerDeployment(ns, "web", workload.ModeShutdownShort, 1, "--drain-delay=1s", "--shutdown-timeout=1s"), nil
		}}
	// Debian's Node.js under Debian's tini (PID 1, forwarding the stop
	// signal), no SIGTERM handler: node dies of it, tini exits 143.
	exitNodeTini = exitServer{"exit/node-tini", "Debian's Node.js under Debian's tini, no SIGTERM handler, 4 /slow in flight",
		func(l *Lab, ns string) (*appsv1.Deployment, error) {
			argv, err := workload.NodeHTTP{Dir: filepath.Join(l.cfg.Out, "nodehttp"), Addr: ":" + strconv.Itoa(cluster.ServerPort)}.Write()
			if err != nil {
				return nil, err
			}
			dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
			ct := &dep.Spec.Template.Spec.Containers[0]
			ct.Image, ct.Args = "local:"+argv[0], argv[1:]
			return dep, nil
		}}
)

// exitScenario: the server, readiness probe on, holds exitSlow /slow
// requests of 20 s when its pod is deleted; it dies with them, no SIGKILL.
// The clients' killed at exit (groundtruth.go) is every /slow cut; nothing
// else is sent, so no live shutdown can reset a connection here.
func exitScenario(s exitServer) func(ctx context.Context, l *Lab) ([]Result, error) {
	return func(ctx context.Context, l *Lab) ([]Result, error) {
		ns := "lab-" + strings.ReplaceAll(s.name, "/", "-")
		dep, err := s.deployment(l, ns)
		if err != nil {
			return nil, errorf("server", err)
		}
		pods, err := l.deploy(ctx, dep)
		if err != nil {
			return nil, errorf("deploying", err)
		}
		pod := &pods[0]
		addr := cluster.PodAddr(pod, cluster.ServerPort)
		l.progress.Step("%s: pod %s on %s at %s: %d × /slow?ms=20000 in flight, then the delete", s.name, pod.Name,
			pod.Spec.NodeName, addr, exitSlow)
		reqs, wait := startSlow(ctx, l, addr, exitSlow)
		time.Sleep(300 * time.Millisecond) // being handled, not just queued
		since := time.Now()
		derr := l.Cluster.DeletePod(ctx, ns, pod.Name)
		wait()
		if derr != nil {
			return nil, errorf("deleting", derr)
		}
		stopped, v, err := l.stopped(ctx, pod)
		if err != nil {
			return nil, err
		}
		death := Death{SIGKILL: stopped.SIGKILLAt, Exit: stopped.ExitAt, StopSignal: stopped.StopSignalAt, NoDrain: true}
		return l.stopResult(ctx, s.name, pod, v, since, death, map[string][]client.Request{"slow": reqs},
			fmt.Sprintf("exit code %d (node agent), %d (drainwatch); death %s of %s; outcome %s; %s",
				stopped.ExitCode, v.ExitCode, v.Death.Kind, v.Death.Comm, v.Outcome, listenerNote(v)))
	}
}
