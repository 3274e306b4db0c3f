package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf/link"
)

// processNetnsRecord is bpf/task_netns.bpf.c's struct proc_netns: pid, netns.
const processNetnsRecord = 8

// ProcessNetns is the task iterator that reports every process's network
// namespace, loaded on first use. A Kernel has one (Kernel.ProcessNetns);
// the zero value is ready to use, Close frees it.
type ProcessNetns struct {
	mu   sync.Mutex
	objs taskNetnsObjects
	iter *link.Iter
	err  error // loading failed: reported on every call
}

// ProcessNetns returns the network namespace inode of every process, by pid
// as this process's /proc names them, read from the kernel's tasks
// (task->nsproxy->net_ns): no /proc/<pid>/ns/net is opened, so no ptrace
// access to other users' processes (CAP_SYS_PTRACE) is needed. Processes
// that are exiting have no namespace left and are not listed. Pid 0 stands
// for the kernel's threads: the initial network namespace, the host's.
func (k *Kernel) ProcessNetns() (map[int]uint32, error) {
	return k.procNetns.Read()
}

// Read runs the iterator once: see Kernel.ProcessNetns.
func (p *ProcessNetns) Read() (map[int]uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.iter == nil && p.err == nil {
		p.iter, p.err = loadProcessNetns(&p.objs)
	}
	if p.err != nil {
		return nil, p.err
	}
	r, err := p.iter.Open()
	if err != nil {
		return nil, fmt.Errorf("reading the process network namespaces: %w", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the process network namespaces: %w", err)
	}
	return decodeProcessNetns(b), nil
}

func decodeProcessNetns(b []byte) map[int]uint32 {
	out := make(map[int]uint32, len(b)/processNetnsRecord)
	for ; len(b) >= processNetnsRecord; b = b[processNetnsRecord:] {
		out[int(binary.NativeEndian.Uint32(b))] = binary.NativeEndian.Uint32(b[4:])
	}
	return out
}

func loadProcessNetns(objs *taskNetnsObjects) (*link.Iter, error) {
	spec, err := loadTaskNetns()
	if err != nil {
		return nil, err
	}
	level, err := pidnsLevel()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["pidns_level"].Set(level); err != nil {
		return nil, fmt.Errorf("setting pidns_level: %w", err)
	}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return nil, fmt.Errorf("loading the task iterator (bpf/task_netns.bpf.c, Linux >= 5.8): %w", err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: objs.TaskNetns})
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("attaching the task iterator: %w", err)
	}
	return it, nil
}

// pidnsLevel is the depth of this process's PID namespace: the number of
// pids NSpid lists, minus one.
func pidnsLevel() (uint32, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the PID namespace depth: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return uint32(len(strings.Fields(v)) - 1), nil
		}
	}
	return 0, nil // kernels before 4.1 have no NSpid: no nested namespaces shown
}

// Close frees the iterator; Read fails afterwards.
func (p *ProcessNetns) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.iter != nil {
		err = errors.Join(p.iter.Close(), p.objs.Close())
		p.iter = nil
	}
	p.err = errors.New("process network namespaces read after Close")
	return err
}
