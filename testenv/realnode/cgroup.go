package realnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is where this host mounts its cgroup hierarchies. In hybrid
// mode (this machine) each v1 controller has its own directory and the
// controller-less cgroup2 sits at unified/; the kubelet and runc both detect
// v1 (statfs of this directory is tmpfs) and use the v1 hierarchies.
const cgroupMount = "/sys/fs/cgroup"

// hierarchies are the cgroup directories of every mounted hierarchy
// (v1 controllers, name=systemd, unified), or the one v2 mount.
func hierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.procs")); err == nil {
		return []string{cgroupMount}, nil // pure cgroup v2
	}
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, fmt.Errorf("listing cgroup hierarchies: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		d := filepath.Join(cgroupMount, e.Name())
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// makeCgroup creates rel in every hierarchy. A new cpuset cgroup has no CPUs
// and memory nodes: they are copied from the parent so processes can join.
func makeCgroup(rel string) error {
	dirs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		p := filepath.Join(h, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", p, err)
		}
		if filepath.Base(h) == "cpuset" {
			if err := fillCpuset(h, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

func fillCpuset(h, rel string) error {
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for i := range parts {
		dir := filepath.Join(append([]string{h}, parts[:i+1]...)...)
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, _ := os.ReadFile(filepath.Join(dir, f))
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				return fmt.Errorf("reading parent %s: %w", f, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("filling %s/%s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// joinCgroup moves pid into rel in every hierarchy: containerd, so that its
// shims (which inherit its cgroups and outlive it) can be found and killed.
func joinCgroup(rel string, pid int) error {
	dirs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		p := filepath.Join(h, rel, "cgroup.procs")
		if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving %d into %s: %w", pid, p, err)
		}
	}
	return nil
}

// killCgroup SIGKILLs every process under rel until none is left (shims,
// containers, pause processes), then removes rel in every hierarchy.
func killCgroup(rel string) error {
	dirs, err := hierarchies()
	if err != nil {
		return err
	}
	for try := 0; try < 100; try++ { // 10 s
		alive := 0
		for _, h := range dirs {
			alive += signalTree(filepath.Join(h, rel))
		}
		if alive == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var errs []error
	for _, h := range dirs {
		errs = append(errs, removeTree(filepath.Join(h, rel)))
	}
	return errors.Join(errs...)
}

// signalTree SIGKILLs the processes of every cgroup under root and returns
// how many it found.
func signalTree(root string) int {
	n := 0
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
		return nil
	})
	return n
}

// removeTree removes the cgroup directories under root, deepest first.
func removeTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}
