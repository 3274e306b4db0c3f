package node

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A container's resources.limits.memory, enforced the way containerd does
// it with runc: the container's memory cgroup gets the limit, and the
// kernel's OOM killer kills a process of it (SIGKILL) when it is reached;
// the runtime then reports the exit as OOMKilled. Real nodes in 2026 are
// cgroup v2 (memory.max, memory.events oom_kill). This host mounts cgroups
// hybrid: the v2 hierarchy at /sys/fs/cgroup/unified has no controllers,
// so the limit goes into the cgroup v1 memory controller
// (memory.limit_in_bytes, memory.oom_control's oom_kill) on a twin of the
// container's scope path; the container's v2 scope (what drainwatch
// attributes by) is unchanged. The OOM kill itself is the kernel's own.

// memoryV1Root is the cgroup v1 memory controller's mount.
const memoryV1Root = "/sys/fs/cgroup/memory"

// memoryCgroup is a container's v1 memory cgroup ("" without a limit).
func memoryCgroup(scope string, cgroup2Root string) string {
	rel, err := filepath.Rel(cgroup2Root, scope)
	if err != nil {
		return ""
	}
	return filepath.Join(memoryV1Root, "drainwatch-testenv", rel)
}

// limitMemory puts pid under a memory limit of bytes in its own v1 memory
// cgroup and returns that cgroup's path.
func limitMemory(path string, pid int, bytes int64) error {
	if _, err := os.Stat(memoryV1Root); err != nil {
		return fmt.Errorf("no cgroup v1 memory controller at %s (a cgroup v2 host would use memory.max): %w", memoryV1Root, err)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return fmt.Errorf("creating memory cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(path, "memory.limit_in_bytes"), []byte(strconv.FormatInt(bytes, 10)), 0o644); err != nil {
		return fmt.Errorf("setting memory limit: %w", err)
	}
	if err := os.WriteFile(filepath.Join(path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("moving container init into its memory cgroup: %w", err)
	}
	return nil
}

// oomKilled says whether the kernel's OOM killer killed a process of the
// memory cgroup (memory.oom_control's oom_kill counter).
func oomKilled(path string) bool {
	f, err := os.Open(filepath.Join(path, "memory.oom_control"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			return n != "0"
		}
	}
	return false
}

// removeMemoryCgroup removes an emptied memory cgroup (its tasks have
// exited; the kernel may take a moment to release them).
func removeMemoryCgroup(path string) {
	if path == "" {
		return
	}
	for i := 0; i < 50; i++ {
		if err := os.Remove(path); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
