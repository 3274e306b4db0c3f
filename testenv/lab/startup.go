package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The startup scenario (issue 24): a tcpSocket readiness probe on a health
// port that listens at once (the probe's first run 3 s after the start),
// the traffic port only 5 s after the start. Independent clients connect
// straight at the traffic port from the pod's first moments, each
// recording its own attempts.
const (
	StartupHealthPort = 8081
	startupProbeWait  = 3 // seconds: the readiness probe's initialDelaySeconds
	startupListen     = 5 * time.Second
	startupEvery      = 25 * time.Millisecond
	startupClients    = 3
	// StartupMargin: no client attempt is within this of the daemon's
	// Ready mark, so each client knows on which side of it it was.
	StartupMargin = 100 * time.Millisecond
)

// ReadyBeforeListening is the startup scenario's Deployment (no Service:
// only the scenario's clients reach the pod).
func ReadyBeforeListening(ns string) *appsv1.Deployment {
	return startupDeployment(ns, "--listen-after="+startupListen.String())
}

// startupResetFor is how long ResetsAfterReady's server resets every
// request after its traffic port opens (at its start): past the probe's
// first run, 3 s after the start, by about 2 s.
const startupResetFor = 5500 * time.Millisecond

// ResetsAfterReady is the second startup scenario's Deployment: the same
// readiness probe on a health port open at once, and a traffic port that
// listens at once too but reads each request and resets its connection
// for the first 5.5 s (a warm-up that drops what comes in). The clients
// send a request on each connection (StartupClients.Request).
func ResetsAfterReady(ns string) *appsv1.Deployment {
	return startupDeployment(ns, "--reset-for="+startupResetFor.String())
}

func startupDeployment(ns string, args ...string) *appsv1.Deployment {
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1,
		append([]string{fmt.Sprintf("--health-port=%d", StartupHealthPort)}, args...)...)
	dep.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: startupProbeWait, PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(StartupHealthPort)}}}
	return dep
}

// Attempt is one client's connection attempt: when it was sent, when the
// connect returned, and whether it was refused or accepted; with a request
// (StartupClients.Request), whether the pod reset the connection instead
// of answering, or answered.
type Attempt struct {
	Sent, Done time.Time
	Refused    bool
	Accepted   bool
	Reset      bool `json:",omitempty"`
	Served     bool `json:",omitempty"`
}

// StartupClients run the startup scenario's clients against Pod.
type StartupClients struct {
	Dial   client.DialFunc
	Client kubernetes.Interface
	Pod    corev1.Pod
	// DaemonReady returns the Ready mark of the pod's startup as the
	// daemon has it so far (zero until it has one).
	DaemonReady func(ctx context.Context) time.Time
	// Request: each accepted connection sends GET /work and reads the
	// answer; the clients stop once served, not once accepted.
	Request bool

	mu       sync.Mutex
	paused   bool
	Attempts [startupClients][]Attempt
	// PauseAt and ResumeAt bound the clients' pause around Ready.
	PauseAt, ResumeAt time.Time
}

// Run runs the clients until each has been accepted for a second (or its
// bounds end: 2,000 attempts, 40 s), pausing around Ready
// (pauseAroundReady).
func (s *StartupClients) Run(ctx context.Context) error {
	lctx, stop := context.WithTimeout(ctx, 40*time.Second)
	defer stop()
	addr := cluster.PodAddr(&s.Pod, cluster.ServerPort)
	var wg sync.WaitGroup
	for i := range startupClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Attempts[i] = s.client(lctx, addr)
		}()
	}
	err := s.pauseAroundReady(lctx)
	wg.Wait()
	return err
}

func (s *StartupClients) client(ctx context.Context, addr string) []Attempt {
	var out []Attempt
	var firstOK time.Time
	for n := 0; n < 2000 && ctx.Err() == nil; n++ {
		time.Sleep(startupEvery)
		if s.isPaused() {
			continue
		}
		if !firstOK.IsZero() && time.Since(firstOK) > time.Second {
			break
		}
		a := Attempt{Sent: time.Now()}
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		conn, err := s.Dial(dctx, "tcp", addr)
		cancel()
		a.Done = time.Now()
		switch {
		case err == nil:
			a.Accepted = true
			if s.Request {
				// The request on this connection, as client.Get records
				// and classifies it (reset: ECONNRESET or EPIPE).
				r := client.Get(ctx, func(context.Context, string, string) (net.Conn, error) { return conn, nil }, addr, "/work", time.Second, nil)
				a.Served, a.Reset = r.Outcome == client.OK, r.Outcome == client.Reset
			}
			conn.Close()
			if firstOK.IsZero() && (a.Served || !s.Request) {
				firstOK = a.Done
			}
		case errors.Is(err, syscall.ECONNREFUSED):
			a.Refused = true
		}
		out = append(out, a)
	}
	return out
}

func (s *StartupClients) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

func (s *StartupClients) setPaused(p bool) {
	s.mu.Lock()
	s.paused = p
	if p {
		s.PauseAt = time.Now()
	} else {
		s.ResumeAt = time.Now()
	}
	s.mu.Unlock()
}

// pauseAroundReady pauses the clients 2.5 s after the container's start
// as the API has it (startedAt, truncated to the second: no later than
// the start; the probe's first run is 3 s after it) and resumes them
// 200 ms after both the API and the daemon show the pod Ready.
func (s *StartupClients) pauseAroundReady(ctx context.Context) error {
	var started time.Time
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := s.Client.CoreV1().Pods(s.Pod.Namespace).Get(ctx, s.Pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, nil
		}
		started = p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("container of %s never ran: %w", s.Pod.Name, err)
	}
	time.Sleep(time.Until(started.Add(startupProbeWait*time.Second - 500*time.Millisecond)))
	s.setPaused(true)
	defer s.setPaused(false)
	err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := s.Client.CoreV1().Pods(s.Pod.Namespace).Get(ctx, s.Pod.Name, metav1.GetOptions{})
		return err == nil && podReady(p) && !s.DaemonReady(ctx).IsZero(), nil
	})
	if err != nil {
		return fmt.Errorf("pod %s not Ready in the API and the daemon: %w", s.Pod.Name, err)
	}
	time.Sleep(200 * time.Millisecond)
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StartupSplit is what the clients saw on each side of a Ready mark.
type StartupSplit struct {
	Attempts, RefusedBefore, RefusedAfter int
	// ResetBefore and ResetAfter are the accepted connections the pod
	// reset instead of answering, sent before and after it.
	ResetBefore, ResetAfter int
	// First is the first attempt accepted after Ready (nil when none
	// was): the daemon's first accept.
	First *Attempt
}

// Split counts the clients' refusals and resets sent before and after
// ready; it fails when an attempt is within StartupMargin of it (the
// clients cannot tell its side).
func (s *StartupClients) Split(ready time.Time) (StartupSplit, error) {
	var out StartupSplit
	for i := range s.Attempts {
		for j := range s.Attempts[i] {
			a := &s.Attempts[i][j]
			out.Attempts++
			if d := a.Sent.Sub(ready); d > -StartupMargin && d < StartupMargin {
				return out, fmt.Errorf("an attempt sent %v from the daemon's Ready mark (paused %v to %v): the clients cannot tell its side",
					d, s.PauseAt.Sub(ready), s.ResumeAt.Sub(ready))
			}
			before := a.Sent.Before(ready)
			switch {
			case a.Refused && before:
				out.RefusedBefore++
			case a.Refused:
				out.RefusedAfter++
			case a.Reset && before:
				out.ResetBefore++
			case a.Reset:
				out.ResetAfter++
			}
			if a.Accepted && !before && (out.First == nil || a.Sent.Before(out.First.Sent)) {
				out.First = a
			}
		}
	}
	return out, nil
}

// WaitAddressed waits for the one pod of ns labelled app=name to have an
// address.
func WaitAddressed(ctx context.Context, c kubernetes.Interface, ns, name string) (corev1.Pod, error) {
	var pod corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(l.Items) != 1 || l.Items[0].Status.PodIP == "" {
			return false, nil
		}
		pod = l.Items[0]
		return true, nil
	})
	if err != nil {
		return pod, fmt.Errorf("no pod with an address in %s: %w", ns, err)
	}
	return pod, nil
}
