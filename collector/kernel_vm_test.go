package collector

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
)

// TestOtherKernelInVM boots another kernel under qemu (TCG) with this test
// binary as /init and runs TestVMGuest there: the same BPF objects must load
// (with fallbacks where that kernel lacks a tracepoint argument) and count
// exactly. Debian's linux-image-6.1.0-*-cloud-amd64 works:
//
//	DRAINWATCH_VM_KERNEL=/boot/vmlinuz-6.1.0-... go test -run OtherKernelInVM ./collector/
func TestOtherKernelInVM(t *testing.T) {
	kernel := os.Getenv("DRAINWATCH_VM_KERNEL")
	if kernel == "" {
		t.Skip("set DRAINWATCH_VM_KERNEL to a vmlinuz to check the probes on another kernel under qemu")
	}
	dir := t.TempDir()
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, "init"), ".")
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
