package realnode

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PodNetns is the inode of the pod's network namespace, read through a
// process of the pod (its pause or a container) in the pod's cgroup
// (<cgroupRoot>/kubepods/…/pod<uid>/<id>, cgroupfs driver).
func (n *Node) PodNetns(uid string) (uint64, error) {
	dirs, err := hierarchies()
	if err != nil {
		return 0, err
	}
	var ino uint64
	walkErr := filepath.WalkDir(filepath.Join(dirs[0], n.cgroupRoot()), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !strings.Contains(p, "/pod"+uid+"/") {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if _, err := strconv.Atoi(f); err != nil {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join("/proc", f, "ns", "net"), &st) == nil {
				ino = st.Ino
				return fs.SkipAll
			}
		}
		return nil
	})
	if walkErr != nil {
		return 0, walkErr
	}
	if ino == 0 {
		return 0, fmt.Errorf("no process of pod %s in node %s's cgroups", uid, n.Name)
	}
	return ino, nil
}
