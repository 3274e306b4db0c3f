package node

import (
	"sort"
	"syscall"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodInfo is what the agent made for a pod: where tests and drainwatch's
// attribution find it in the kernel.
type PodInfo struct {
	UID             types.UID
	Namespace, Name string
	IP              string
	Netns           string // bind mount path under /run/netns
	NetnsInode      uint32 // the netns inum sockets of the pod carry
	PodCgroup       string // absolute path of the pod slice
	SandboxID       string // the (empty) pause scope's ID: not a container
	Containers      []ContainerInfo
}

// ContainerInfo is one container's current (or last) run.
type ContainerInfo struct {
	Name, ID string // ID: 64 hex, status says containerd://<ID>
	Cgroup   string // absolute path of cri-containerd-<ID>.scope
	CgroupID uint64 // inode of the scope directory: the kernel's cgroup id
	InitPID  int    // PID 1 of the container, as seen from the root PID namespace
	LogPath  string
	Running  bool
}

// Name is the Node's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Index is the node index (pod CIDR 10.244.<Index>.0/24).
func (a *Agent) Index() int { return a.cfg.Index }

// NodeNS is the node's network namespace (probes and preStop httpGet
// connect from it).
func (a *Agent) NodeNS() *netlab.NS { return a.nodeNS }

// LogDir is where container logs are written.
func (a *Agent) LogDir() string { return a.cfg.LogDir }

// Pod returns what the agent made for a pod, running or finished.
func (a *Agent) Pod(uid types.UID) (PodInfo, bool) {
	a.mu.Lock()
	w := a.workers[uid]
	if w == nil {
		w = a.finished[uid]
	}
	a.mu.Unlock()
	if w == nil {
		return PodInfo{}, false
	}
	return w.info(), true
}

// Pods lists the pods the agent currently runs.
func (a *Agent) Pods() []PodInfo {
	a.mu.Lock()
	ws := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		ws = append(ws, w)
	}
	a.mu.Unlock()
	out := make([]PodInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+out[i].Name < out[j].Namespace+out[j].Name })
	return out
}

// Terminations returns how the pod's containers were stopped (empty until
// its termination has finished for a container).
func (a *Agent) Terminations(uid types.UID) []Termination {
	return a.podRecords(uid, func(w *podWorker) []*Termination { return w.terminations })
}

// Restarts returns the pod's container kills for a restart (a failed
// liveness or startup probe) that have finished, oldest first: the ground
// truth of a container termination without a deletion.
func (a *Agent) Restarts(uid types.UID) []Termination {
	return a.podRecords(uid, func(w *podWorker) []*Termination { return w.restartKills })
}

// podRecords copies one list of the pod's worker (running or finished)
// under its lock.
func (a *Agent) podRecords(uid types.UID, list func(*podWorker) []*Termination) []Termination {
	a.mu.Lock()
	w := a.workers[uid]
	if w == nil {
		w = a.finished[uid]
	}
	a.mu.Unlock()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ts := list(w)
	out := make([]Termination, 0, len(ts))
	for _, t := range ts {
		out = append(out, *t)
	}
	return out
}

// AllTerminations returns every container termination of pod deletions
// this agent has carried out, in the order they finished: the ground truth
// of a rollout whose pod UIDs the caller does not know.
func (a *Agent) AllTerminations() []Termination {
	a.mu.Lock()
	ws := make([]*podWorker, 0, len(a.finished)+len(a.workers))
	for _, w := range a.finished {
		ws = append(ws, w)
	}
	for _, w := range a.workers {
		ws = append(ws, w)
	}
	a.mu.Unlock()
	var out []Termination
	for _, w := range ws {
		w.mu.Lock()
		for _, t := range w.terminations {
			out = append(out, *t)
		}
		w.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExitAt.Before(out[j].ExitAt) })
	return out
}

func (w *podWorker) info() PodInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	pi := PodInfo{UID: w.pod.UID, Namespace: w.pod.Namespace, Name: w.pod.Name}
	if w.sb != nil {
		pi.IP, pi.PodCgroup, pi.SandboxID = w.sb.IP, w.sb.slice, w.sb.sandboxID
		if w.sb.ns != nil {
			pi.Netns, pi.NetnsInode = w.sb.ns.Path(), w.sb.ns.Inode()
		}
	}
	specs := append(append([]*corev1.Container{}, nativeSidecars(w.pod)...), pointers(w.pod.Spec.Containers)...)
	for _, spec := range specs {
		cs := w.containers[spec.Name]
		if cs == nil || cs.run == nil {
			continue
		}
		c := cs.run
		pi.Containers = append(pi.Containers, ContainerInfo{Name: spec.Name, ID: c.id, Cgroup: c.scope,
			CgroupID: c.cgroupID, InitPID: c.pid, LogPath: c.logPath, Running: cs.terminated == nil})
	}
	return pi
}

func inode(path string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}
