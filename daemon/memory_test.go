package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseMemoryMax(t *testing.T) {
	for in, want := range map[string]int64{"134217728\n": 128 << 20, "max\n": 0, "": 0, "-1": 0} {
		if got := parseMemoryMax(in); got != want {
			t.Errorf("parseMemoryMax(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	proc, root := t.TempDir(), t.TempDir()
	write(t, filepath.Join(proc, "self", "cgroup"), "12:memory:/ignored\n0::/kubepods.slice/pod1\n")
	write(t, filepath.Join(root, "kubepods.slice", "pod1", "memory.max"), "268435456\n")
	limit, path, err := cgroupMemoryLimit(proc, root)
	if err != nil || limit != 256<<20 {
		t.Errorf("cgroupMemoryLimit = %d (%s), %v; want 268435456", limit, path, err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
