package node

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestNetnsSkipsRuncInit: a cgroup whose first processes are runc's init
// stages before the namespaces (exe, runc, runc:[0:PARENT],
// runc:[1:CHILD]) gives the namespace of the process after them; with only
// those, none (a later scan retries).
func TestNetnsSkipsRuncInit(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	procs := ""
	for i, comm := range []string{"exe", "runc", "runc:[0:PARENT]", "runc:[1:CHILD]", "pause"} {
		pid := 100 + i
		dir := filepath.Join(proc, strconv.Itoa(pid), "ns")
		mustOK(t, os.MkdirAll(dir, 0o755))
		mustOK(t, os.WriteFile(filepath.Join(proc, strconv.Itoa(pid), "comm"), []byte(comm+"\n"), 0o644))
		mustOK(t, os.WriteFile(filepath.Join(dir, "net"), nil, 0o644))
		procs += strconv.Itoa(pid) + "\n"
	}
	mustOK(t, os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(procs), 0o644))
	want := uint32(inode(t, filepath.Join(proc, "104", "ns", "net")))
	f, ino, ok, err := OpenContainerNetns(proc, cg, nil)
	if err != nil || !ok || ino != want {
		t.Fatalf("OpenContainerNetns = %d, %v, %v; want pause's %d", ino, ok, err, want)
	}
	f.Close()
	if ino, ok, err := ContainerNetns(proc, cg); err != nil || !ok || ino != want {
		t.Fatalf("ContainerNetns = %d, %v, %v; want pause's %d", ino, ok, err, want)
	}
	mustOK(t, os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte("100\n101\n102\n103\n"), 0o644))
	if _, _, ok, err := OpenContainerNetns(proc, cg, nil); ok || err != nil {
		t.Fatalf("only runc's init: ok=%v err=%v, want not ok, no error", ok, err)
	}
}
