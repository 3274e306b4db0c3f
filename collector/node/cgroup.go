package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Cgroup2Mount finds where the cgroup v2 hierarchy is mounted, from
// /proc/self/mountinfo: /sys/fs/cgroup on unified hosts,
// /sys/fs/cgroup/unified on hybrid ones.
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("finding the cgroup2 mount: %w", err)
	}
	defer f.Close()
	return parseCgroup2Mount(f)
}

// parseCgroup2Mount reads mountinfo lines: "id parent major:minor root
// mountpoint options [optional...] - fstype source superoptions".
func parseCgroup2Mount(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := indexOf(fields, "-")
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		if fields[sep+1] == "cgroup2" {
			return unescapeMountinfo(fields[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading mountinfo: %w", err)
	}
	return "", errors.New("no cgroup2 filesystem is mounted (mount -t cgroup2 none /sys/fs/cgroup)")
}

func indexOf(fields []string, s string) int {
	for i, f := range fields {
		if f == s {
			return i
		}
	}
	return -1
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) the kernel
// writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return len(s) == 3
}

// CgroupID returns the cgroup v2 id of a cgroup directory: its inode number,
// which is what the kernel reports as kernfs_node id and
// bpf_get_current_cgroup_id. A relative path is taken below the cgroup2 mount.
func CgroupID(path string) (uint64, error) {
	if !filepath.IsAbs(path) {
		mnt, err := Cgroup2Mount()
		if err != nil {
			return 0, err
		}
		path = filepath.Join(mnt, path)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return 0, fmt.Errorf("cgroup %s is not a directory", path)
	}
	return st.Ino, nil
}

// CgroupOfPID returns the cgroup v2 directory of a process.
func CgroupOfPID(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("reading the cgroup of pid %d: %w", pid, err)
	}
	rel, err := parseProcCgroup(string(b))
	if err != nil {
		return "", fmt.Errorf("pid %d: %w", pid, err)
	}
	mnt, err := Cgroup2Mount()
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, rel), nil
}

// parseProcCgroup picks the unified hierarchy's line ("0::/path") of
// /proc/<pid>/cgroup.
func parseProcCgroup(s string) (string, error) {
	for _, line := range strings.Split(s, "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			return rel, nil
		}
	}
	return "", errors.New("no cgroup v2 entry (0::) in /proc/<pid>/cgroup")
}
