package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxCgroupDepth bounds the walk: the deepest kubelet layout (systemd driver
// under a nested kubelet.slice) has the container at depth 5.
const maxCgroupDepth = 8

// FoundCgroup is a container cgroup found under the cgroup2 mount.
type FoundCgroup struct {
	ContainerCgroup
	// Dir is the cgroup's directory, under the mount.
	Dir string
	// ID is the cgroup v2 id (the directory's inode number), as BPF's
	// bpf_get_current_cgroup_id and task->cgroups report it.
	ID uint64
}

// ScanContainerCgroups walks the cgroup2 mount at root once and returns every
// container cgroup under a kubepods tree, by container id. A node with 110
// pods has a few hundred cgroup directories: one walk per new container is
// cheap, and it needs no runtime socket.
func ScanContainerCgroups(root string) (map[string]FoundCgroup, error) {
	found := make(map[string]FoundCgroup)
	base := strings.Count(filepath.Clean(root), string(filepath.Separator))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != root && errors.Is(err, fs.ErrNotExist) {
				return nil // a cgroup removed during the walk
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if strings.Count(path, string(filepath.Separator))-base >= maxCgroupDepth {
			return filepath.SkipDir
		}
		c, ok := ParseContainerCgroup(strings.TrimPrefix(path, root))
		if !ok {
			return nil
		}
		id, err := cgroupDirID(path)
		if err != nil {
			return nil // removed between listing and stat
		}
		found[c.ContainerID] = FoundCgroup{ContainerCgroup: c, Dir: path, ID: id}
		return filepath.SkipDir // a container's own sub-cgroups are not containers
	})
	if err != nil {
		return nil, fmt.Errorf("walking cgroup2 mount %s for container cgroups: %w", root, err)
	}
	return found, nil
}

// cgroupDirID returns the cgroup v2 id of a cgroup directory: on cgroup2 the
// kernfs node id is the directory's inode number.
func cgroupDirID(dir string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("stat cgroup %s: %w", dir, err)
	}
	return st.Ino, nil
}

// ContainerNetns returns the network namespace inode of the container whose
// cgroup is dir, through the first process in its cgroup.procs. ok is false
// when the cgroup has no process (not started yet, or already gone).
func ContainerNetns(procRoot, dir string) (ino uint32, ok bool, err error) {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, false, fmt.Errorf("reading processes of cgroup %s: %w", dir, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil || runtimeHelper(procRoot, pid) {
			continue
		}
		ino, err := netnsOfPID(procRoot, pid)
		if err == nil {
			return ino, true, nil
		}
		// The process may have exited between reading the list and its
		// namespace: try the next one.
	}
	return 0, false, sc.Err()
}

// OpenContainerNetns holds the network namespace of the container whose
// cgroup is dir (through the first live process in its cgroup.procs) and
// returns the held file with the namespace's inode. Holding the file keeps
// the namespace, and so its inode number, from being reused by a new pod
// while the old pod's events are still attributed by that number. ok is
// false when the cgroup has no process.
//
// The inode comes from the kernel's task (processNetns, a BPF task
// iterator: kernel.ProcessNetns) and the namespace is held by
// /proc/<pid>/net/dev, which pins its network namespace while open: neither
// needs ptrace access to the pod's processes, as /proc/<pid>/ns/net does
// (CAP_SYS_PTRACE for pods of another user or with capabilities the daemon
// lacks). A pidfd opened first proves that the pid named the same process
// from the open to the read. A nil processNetns (a kernel without BPF
// iterators) falls back to /proc/<pid>/ns/net.
func OpenContainerNetns(procRoot, dir string, processNetns func() (map[int]uint32, error)) (f *os.File, ino uint32, ok bool, err error) {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading processes of cgroup %s: %w", dir, err)
	}
	for _, line := range strings.Fields(string(procs)) {
		pid, err := strconv.Atoi(line)
		if err != nil || runtimeHelper(procRoot, pid) {
			continue
		}
		if processNetns == nil {
			f, ino, err = openNsNet(procRoot, pid)
		} else {
			f, ino, err = holdProcessNetns(procRoot, pid, processNetns)
		}
		if errors.Is(err, errProcessGone) {
			continue // exited meanwhile: try the next one
		}
		if err != nil {
			return nil, 0, false, err
		}
		return f, ino, true, nil
	}
	return nil, 0, false, nil
}

// ProcessNetnsError: the kernel could not report process namespaces.
type ProcessNetnsError struct{ Err error }

func (e *ProcessNetnsError) Error() string {
	return "reading process network namespaces from the kernel: " + e.Err.Error()
}

func (e *ProcessNetnsError) Unwrap() error { return e.Err }

// errProcessGone: the process exited while its namespace was being read.
var errProcessGone = errors.New("process exited")

// holdProcessNetns opens /proc/<pid>/net/dev and reads the process's
// namespace inode from the kernel, while a pidfd shows the process alive.
func holdProcessNetns(procRoot string, pid int, processNetns func() (map[int]uint32, error)) (*os.File, uint32, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, 0, errProcessGone
	}
	defer unix.Close(pidfd)
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "net", "dev"))
	if err != nil {
		return nil, 0, errProcessGone
	}
	all, err := processNetns()
	if err != nil {
		f.Close()
		return nil, 0, &ProcessNetnsError{Err: err}
	}
	ino, listed := all[pid]
	if !listed || exited(pidfd) {
		f.Close()
		return nil, 0, errProcessGone
	}
	return f, ino, nil
}

// exited reports whether the process of pidfd has exited (the pidfd is
// readable then).
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0
}

// openNsNet opens /proc/<pid>/ns/net, which needs ptrace read access to pid.
func openNsNet(procRoot string, pid int) (*os.File, uint32, error) {
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "ns", "net"))
	if err != nil {
		return nil, 0, errProcessGone
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, 0, errProcessGone
	}
	return f, uint32(st.Ino), nil
}

// runcStages are the names runc's init process has while it is in the
// pod's cgroup but not yet in the pod's namespaces: "exe" (re-executed
// through /proc/self/exe), "runc", then nsexec's stages 0 and 1 (stage 1
// joins the namespaces; stage 2, runc:[2:INIT], is inside them). runc puts
// the process in the cgroup first: a scan meanwhile read the runtime's
// network namespace (the host's on a node) as the pod's, and the pod's own
// was never watched. Seen on testenv's real node (containerd 1.6, runc 1.1):
// one pod of eight had every refusal missed.
var runcStages = map[string]bool{"exe": true, "runc": true, "runc:[0:PARENT]": true, "runc:[1:CHILD]": true}

// runtimeHelper says whether pid is runc's init before it joined the
// container's namespaces; a scan then skips it and a later one binds the
// pod (its pause or container process).
func runtimeHelper(procRoot string, pid int) bool {
	comm, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
	return err == nil && runcStages[strings.TrimSpace(string(comm))]
}

// netnsOfPID returns the inode of /proc/<pid>/ns/net.
func netnsOfPID(procRoot string, pid int) (uint32, error) {
	var st syscall.Stat_t
	p := filepath.Join(procRoot, strconv.Itoa(pid), "ns", "net")
	if err := syscall.Stat(p, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", p, err)
	}
	return uint32(st.Ino), nil
}
