package node

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func TestParseCgroup2Mount(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"hybrid": {in: `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`, want: "/sys/fs/cgroup/unified"},
		"unified with optional fields": {in: `30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate`, want: "/sys/fs/cgroup"},
		"escaped space":                {in: `30 24 0:26 / /mnt/my\040cg rw - cgroup2 none rw`, want: "/mnt/my cg"},
	} {
		got, err := parseCgroup2Mount(strings.NewReader(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, tc.want)
		}
	}
	if _, err := parseCgroup2Mount(strings.NewReader("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n")); err == nil {
		t.Error("no cgroup2 line: want an error")
	}
}

func TestParseProcCgroup(t *testing.T) {
	got, err := parseProcCgroup("4:memory:/x\n0::/kubepods.slice/cri-containerd-ab.scope\n")
	if err != nil || got != "/kubepods.slice/cri-containerd-ab.scope" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := parseProcCgroup("4:memory:/x\n"); err == nil {
		t.Fatal("v1 only: want an error")
	}
}

// TestCgroupIDIsInode: the id of a directory is its inode (any directory
// works for the lookup itself; no cgroupfs needed).
func TestCgroupIDIsInode(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	id, err := CgroupID(dir)
	if err != nil || id != st.Ino {
		t.Fatalf("CgroupID = %d, %v; want %d", id, err, st.Ino)
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := CgroupID(f); err == nil {
		t.Fatal("a file is not a cgroup: want an error")
	}
}

func TestCgroupOfSelf(t *testing.T) {
	if _, err := Cgroup2Mount(); err != nil {
		if privileged.InCI() {
			t.Fatalf("no cgroup2 mount: %v", err)
		}
		t.Skipf("no cgroup2 here: %v", err)
	}
	dir, err := CgroupOfPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CgroupID(dir); err != nil {
		t.Fatal(err)
	}
}
