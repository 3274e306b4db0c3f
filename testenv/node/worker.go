package node

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWorker owns one pod on this node from its first sighting to its
// deletion, like the kubelet's pod worker: every change of the pod's
// containers and status goes through its goroutine (run).
type podWorker struct {
	a   *Agent
	log zerolog.Logger

	pod         *corev1.Pod // latest seen
	last        *corev1.Pod // the state it was removed from the API with
	sb          *sandbox
	containers  map[string]*containerStatus
	conditions  map[corev1.PodConditionType]corev1.PodCondition
	startTime   metav1.Time
	terminating bool
	// statusStale: the last status write failed; the run loop writes the
	// status again every statusResync, as the kubelet's status manager
	// does, so an API-server outage does not leave a stale status for ever.
	statusStale bool

	updates  chan *corev1.Pod // latest pod, capacity 1
	gone     chan struct{}    // closed when the pod left the API
	goneOnce sync.Once
	exits    chan *container
	probes   chan probeResult
	restarts chan string // container name whose backoff elapsed
	verdicts chan verdict
	done     chan struct{}
	// verdict is the kubelet's own decision to stop the pod (eviction,
	// node shutdown), nil until it makes one.
	verdict *verdict

	probeCtx     context.Context
	stopProbes   context.CancelFunc
	stopLiveness map[string]context.CancelFunc

	mu           sync.Mutex // guards what accessors read: sb, runs, terminations
	terminations []*Termination
	// restartKills are the containers the agent killed to restart them (a
	// failed liveness or startup probe), in the order the kills began.
	restartKills []*Termination
}

func newPodWorker(a *Agent, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		a: a, pod: pod, log: a.log.With().Str("pod", pod.Namespace+"/"+pod.Name).Logger(),
		containers: map[string]*containerStatus{}, conditions: map[corev1.PodConditionType]corev1.PodCondition{},
		startTime: metav1.NewTime(time.Now()), updates: make(chan *corev1.Pod, 1), gone: make(chan struct{}),
		exits: make(chan *container, 16), probes: make(chan probeResult, 16), restarts: make(chan string, 16),
		verdicts: make(chan verdict),
		done:     make(chan struct{}), stopLiveness: map[string]context.CancelFunc{},
	}
	for _, c := range pod.Spec.Containers {
		w.containers[c.Name] = &containerStatus{waiting: "ContainerCreating", restartable: restartable(pod, 1)}
	}
	for _, c := range nativeSidecars(pod) {
		w.containers[c.Name] = &containerStatus{waiting: "ContainerCreating", restartable: true}
	}
	return w
}

// update hands the worker the latest version of its pod, replacing any
// version it has not consumed yet.
func (w *podWorker) update(pod *corev1.Pod) {
	select {
	case <-w.updates:
	default:
	}
	w.updates <- pod
}

// markGone tells the worker its pod was removed from the API, with the
// pod's last state.
func (w *podWorker) markGone(last *corev1.Pod) {
	w.goneOnce.Do(func() {
		w.mu.Lock()
		w.last = last
		w.mu.Unlock()
		close(w.gone)
	})
}

// final is the pod's last state: the one it was removed with, if it was.
func (w *podWorker) final() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != nil {
		return w.last
	}
	return w.pod
}

func (w *podWorker) setPod(p *corev1.Pod) {
	w.mu.Lock()
	w.pod = p
	w.mu.Unlock()
}

// run is the worker's loop: start the pod, follow its containers and
// probes, and terminate it when it is deleted or the agent stops.
func (w *podWorker) run(ctx context.Context) {
	defer close(w.done)
	w.probeCtx, w.stopProbes = context.WithCancel(ctx)
	defer w.stopProbes()
	w.start(ctx)
	resync := time.NewTicker(statusResync)
	defer resync.Stop()
	for {
		select {
		case <-resync.C:
			if w.statusStale {
				w.push(ctx)
			}
		case p := <-w.updates:
			w.setPod(p)
			if p.DeletionTimestamp != nil {
				w.terminate(ctx, GracePeriod(p), true)
				return
			}
		case <-w.gone:
			w.terminate(ctx, GracePeriod(w.final()), false)
			return
		case c := <-w.exits:
			w.onExit(ctx, c)
		case r := <-w.probes:
			w.onProbe(ctx, r)
		case name := <-w.restarts:
			w.restart(ctx, name)
		case v := <-w.verdicts:
			w.stopByKubelet(ctx, v)
			w.afterKubeletStop(ctx)
			return
		case <-ctx.Done():
			w.shutdown()
			return
		}
	}
}

// restartable says whether a container run that exited with code should be
// restarted under the pod's restart policy.
func restartable(pod *corev1.Pod, code int32) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// statusResync is how often a worker writes a status it failed to write.
const statusResync = 2 * time.Second

// backoff is the kubelet's crash-loop delay before restart number n (n ≥ 1):
// 10 s doubling up to 5 min; the first restart after a clean run is quick.
func backoff(n int32) time.Duration {
	d := 10 * time.Second
	for i := int32(1); i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// shutdown is the agent stopping: kill everything at once, remove the
// sandbox, touch nothing in the API.
func (w *podWorker) shutdown() {
	w.stopProbes()
	for _, cs := range w.containers {
		if cs.run != nil {
			if err := w.a.forceStop(cs.run); err != nil {
				w.log.Error().Err(err).Msg("stopping container at agent shutdown")
			}
		}
	}
	w.teardown()
}

// teardown removes the container scopes and the sandbox.
func (w *podWorker) teardown() {
	for _, cs := range w.containers {
		if cs.run != nil {
			if err := removeCgroup(cs.run.scope); err != nil {
				w.log.Error().Err(err).Msg("removing container cgroup")
			}
		}
	}
	if w.sb != nil {
		if err := w.a.removeSandbox(w.sb); err != nil {
			w.log.Error().Err(err).Msg("removing sandbox")
		}
	}
}
