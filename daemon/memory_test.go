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

func TestReadOnlyMappings(t *testing.T) {
	maps := filepath.Join(t.TempDir(), "maps")
	write(t, maps, `00400000-01dd4000 r-xp 00000000 fe:00 9979346  /bin/dw
01dd4000-03d93000 r--p 019d4000 fe:00 9979346  /bin/dw
03d93000-03e9c000 rw-p 03993000 fe:00 9979346  /bin/dw
7f0044629000-7f004462b000 r--s 00000000 00:10 1038  anon_inode:bpf-map
7f0044700000-7f0044800000 r-xp 00000000 fe:00 12  /usr/lib/libc.so.6
`)
	got, err := readOnlyMappings(maps, "/bin/dw")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uintptr{{0x400000, 0x1dd4000}, {0x1dd4000, 0x3d93000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readOnlyMappings = %#v, want %#v", got, want)
	}
}

// TestReleaseStartupPages releases the test binary's own code pages and
// keeps running it: the pages fault back in.
func TestReleaseStartupPages(t *testing.T) {
	n, err := releaseStartupPages("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no read-only mapping of the test binary released")
	}
	if got := parseMemoryMax("42"); got != 42 {
		t.Fatalf("code after the release computes %d, want 42", got)
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
