package kernel

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestOtherKernelInVM boots another kernel under qemu (TCG) with this test
// binary as /init and runs TestVMGuest there: the same BPF objects must load
// (with fallbacks where that kernel lacks a tracepoint argument) and count
// exactly. Debian's linux-image-6.1.0-*-cloud-amd64 works; `make test`
// fetches it (make vmkernel) and sets DRAINWATCH_VM_KERNEL:
//
//	DRAINWATCH_VM_KERNEL=/boot/vmlinuz-6.1.0-... go test -run OtherKernelInVM ./collector/kernel/
func TestOtherKernelInVM(t *testing.T) {
	kernel := os.Getenv("DRAINWATCH_VM_KERNEL")
	if kernel == "" {
		if privileged.InCI() {
			t.Fatal("DRAINWATCH_VM_KERNEL is unset: make test fetches Debian's 6.1 kernel (make vmkernel)")
		}
		t.Skip("set DRAINWATCH_VM_KERNEL to a vmlinuz to check the probes on another kernel under qemu")
	}
	privileged.RequireFile(t, kernel, "the kernel to boot")
	privileged.RequireFile(t, "/usr/bin/qemu-system-x86_64", "qemu (Debian's qemu-system-x86)")
	dir := t.TempDir()
	// The guest's test (TestVMGuest) exists only under the vmguest tag, so
	// it is never a skipped test of an ordinary run.
	build := exec.Command("go", "test", "-c", "-tags", "vmguest", "-o", filepath.Join(dir, "init"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guest: %v\n%s", err, out)
	}
	initrd := filepath.Join(dir, "initrd.gz")
	if err := writeInitramfs(initrd, filepath.Join(dir, "init")); err != nil {
		t.Fatal(err)
	}
	qemu := exec.Command("timeout", "600", "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", "1024",
		"-nographic", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 rdinit=/init panic=-1 quiet DRAINWATCH_VM_GUEST=1 -- -test.run=^TestVMGuest$ -test.v")
	out, err := qemu.CombinedOutput()
	console := string(bytes.ToValidUTF8(out, nil))
	for _, line := range regexp.MustCompile(`(?m)^.*(VMGUEST|--- |PASS|FAIL|panic).*$`).FindAllString(console, -1) {
		t.Log(strings.TrimSpace(line))
	}
	if err != nil || !strings.Contains(console, "--- PASS: TestVMGuest") {
		t.Fatalf("guest did not pass (qemu: %v)", err)
	}
}

// writeInitramfs writes a gzipped newc cpio holding /init and the mount
// points it needs.
func writeInitramfs(path, init string) error {
	bin, err := os.ReadFile(init)
	if err != nil {
		return err
	}
	var cpio bytes.Buffer
	entry := func(ino int, name string, mode uint32, data []byte) {
		fmt.Fprintf(&cpio, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		cpio.WriteString(name + "\x00")
		pad4(&cpio)
		cpio.Write(data)
		pad4(&cpio)
	}
	for i, d := range []string{"dev", "proc", "sys"} {
		entry(i+1, d, 0o040755, nil)
	}
	entry(4, "init", 0o100755, bin)
	entry(0, "TRAILER!!!", 0, nil)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(cpio.Bytes()); err != nil {
		return err
	}
	return zw.Close()
}

func pad4(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}
