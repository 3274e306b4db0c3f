package kernel

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// vmKernel is a row of the kernel matrix: a directory of `make vmkernel`
// (testenv/scripts/vm-kernel.sh) booted under qemu with TCG, with the CPU
// model and the kernel parameters that kernel boots reliably with.
type vmKernel struct {
	dir, arch string
	cpu       string // qemu -cpu
	cmdline   string // kernel parameters beyond the console and init
}

// amd64 kernels get no_timer_check: under TCG on a loaded host the
// IO-APIC timer check can miss its ticks and panic ("IO-APIC + timer
// doesn't work!") before init.
var vmKernels = []vmKernel{
	{"amd64-5.10", "amd64", "max", "no_timer_check"},
	{"amd64-6.1", "amd64", "max", "no_timer_check"},
	// Without cx16: qemu 7.2's TCG corrupts the guest's EFLAGS around
	// 6.12's SLUB fast path (`cmpxchg16b %gs:(%rsi); jne`), a double fault
	// at kmem_cache_alloc_noprof+0xc3 with EFLAGS holding the object
	// pointer, in about half of the boots with any CPU model that has
	// cx16. Without it the kernel takes its this_cpu_cmpxchg16b_emu path.
	{"amd64-6.12", "amd64", "max,-cx16", "no_timer_check"},
	{"arm64", "arm64", "max,pauth-impdef=on", ""},
}

// bootRetries is a last resort for a kernel that panics under TCG before
// our suite starts: such a boot is logged and retried. A boot whose suite
// started is never retried: a panic during the suite fails it, a panic
// after the suite printed its verdict fails unless that verdict was PASS.
const bootRetries = 3

// TestVMMatrix runs the matrix suite (TestVMGuest, built with the vmguest
// tag) natively on this host's kernel, in a network namespace of its own,
// then as /init of each of Debian's cloud kernels under qemu: the same BPF
// objects must load (with fallbacks where a kernel lacks a hook or an
// argument) and count exactly. Each run prints its MATRIX lines (appended
// to $DRAINWATCH_MATRIX_OUT when set, for tools/supportmatrix) and
// its time. `make test` fetches the kernels (make vmkernel):
//
//	DRAINWATCH_VM_KERNELS=$PWD/.cache/vmkernel go test -run VMMatrix ./collector/kernel/
func TestVMMatrix(t *testing.T) {
	dir := os.Getenv("DRAINWATCH_VM_KERNELS")
	if dir == "" {
		if privileged.InCI() {
			t.Fatal("DRAINWATCH_VM_KERNELS is unset: make test fetches Debian's kernels (make vmkernel)")
		}
		t.Skip("set DRAINWATCH_VM_KERNELS to make vmkernel's directory to run the kernel matrix")
	}
	privileged.RequireRoot(t)
	guests := map[string]string{"dir": t.TempDir()}
	t.Run("host", func(t *testing.T) {
		runMatrix(t, "host", exec.Command("unshare", "-n", guestBinary(t, guests, runtime.GOARCH),
			"-test.run=^TestVMGuest$", "-test.v"), true, "DRAINWATCH_VM_STAGE=native")
	})
	for _, k := range vmKernels {
		t.Run(k.dir, func(t *testing.T) { bootKernel(t, k, filepath.Join(dir, k.dir), guests) })
	}
	if os.Getenv("DRAINWATCH_MATRIX_REGENERATE") == "" {
		checkCommittedMatrix(t, filepath.Join("..", "..", "docs", "support-matrix.txt"))
	}
}

// matrixRuns holds each run's MATRIX lines, by run name ("host" or the
// kernel's directory), for checkCommittedMatrix.
var matrixRuns = map[string][]string{}

// checkCommittedMatrix fails when a guest's MATRIX lines differ from the
// committed support matrix's lines for that kernel series (major.minor and
// arch: Debian's cloud kernels move to newer point releases, which the
// committed copy need not follow): the docs must say what the matrix
// measures. The host's lines are not compared: its column is named after
// whatever kernel runs the tests. `make support-matrix` regenerates the
// committed copy and the pages made from it (with
// DRAINWATCH_MATRIX_REGENERATE set, which skips this check).
func checkCommittedMatrix(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the committed support matrix: %v", err)
	}
	committed := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, rest := matrixSeries(line); k != "" {
			committed[k] = append(committed[k], rest)
		}
	}
	for run, lines := range matrixRuns {
		if run == "host" || len(lines) == 0 {
			continue
		}
		k, _ := matrixSeries(lines[0])
		var measured []string
		for _, line := range lines {
			_, rest := matrixSeries(line)
			measured = append(measured, rest)
		}
		if !slices.Equal(committed[k], measured) {
			t.Errorf("%s: the kernel matrix measured on %s differs from %s (run `make support-matrix` and commit the result):\nmeasured:\n%s\ncommitted:\n%s",
				run, k, path, strings.Join(measured, "\n"), strings.Join(committed[k], "\n"))
		}
	}
}

// matrixSeries splits a MATRIX line into its kernel series ("6.1 arm64")
// and the rest after the kernel and arch fields; "" for other lines.
func matrixSeries(line string) (string, string) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "MATRIX" || !strings.HasPrefix(f[1], "kernel=") || !strings.HasPrefix(f[2], "arch=") {
		return "", ""
	}
	v := strings.SplitN(strings.TrimPrefix(f[1], "kernel="), ".", 3)
	if len(v) < 2 {
		return "", ""
	}
	return v[0] + "." + v[1] + " " + strings.TrimPrefix(f[2], "arch="), strings.Join(f[3:], " ")
}

// guestBinary builds the suite for arch once per run.
func guestBinary(t *testing.T, built map[string]string, arch string) string {
	if bin, ok := built[arch]; ok {
		return bin
	}
	bin := filepath.Join(built["dir"], "init-"+arch)
	build := exec.Command("go", "test", "-c", "-tags", "vmguest", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+arch)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guest for %s (arm64 needs the arm64 BPF objects: bpf2go -target arm64): %v\n%s", arch, err, out)
	}
	built[arch] = bin
	return bin
}

func bootKernel(t *testing.T, k vmKernel, dir string, guests map[string]string) {
	kernel := filepath.Join(dir, "vmlinuz")
	privileged.RequireFile(t, kernel, "the kernel to boot (make vmkernel)")
	qemu, console := "qemu-system-x86_64", "ttyS0"
	args := []string{"-accel", "tcg", "-cpu", k.cpu}
	if k.arch == "arm64" {
		qemu, console = "qemu-system-aarch64", "ttyAMA0"
		args = append([]string{"-M", "virt"}, args...)
	}
	privileged.RequireFile(t, "/usr/bin/"+qemu, "qemu (Debian's qemu-system-x86 / qemu-system-arm)")
	initrd := filepath.Join(t.TempDir(), "initrd.gz")
	if err := writeInitramfs(initrd, guestBinary(t, guests, k.arch)); err != nil {
		t.Fatal(err)
	}
	args = append(args, "-smp", "2", "-m", "1024", "-nographic", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
		"-append", "console="+console+" rdinit=/init panic=-1 quiet "+k.cmdline+" DRAINWATCH_VM_GUEST=1 -- -test.run=^TestVMGuest$ -test.v")
	for i := 1; ; i++ {
		cmd := exec.Command("timeout", append([]string{"300", qemu}, args...)...)
		if runMatrix(t, filepath.Base(dir), cmd, i == bootRetries) {
			return
		}
		t.Logf("boot %d of %s panicked before the suite started: booting again", i, filepath.Base(dir))
	}
}

// runMatrix runs one matrix suite (a VM or the native run), logs its
// verdict lines, keeps its MATRIX lines and prints its time. It returns
// false, without failing, when a VM panicked before the suite started and
// this is not the last attempt.
func runMatrix(t *testing.T, name string, cmd *exec.Cmd, last bool, env ...string) bool {
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	console := string(bytes.ToValidUTF8(out, nil))
	if !last && !strings.Contains(console, "=== RUN   TestVMGuest") && strings.Contains(console, "Kernel panic") {
		t.Logf("console tail:\n%s", tail(console, 12))
		return false
	}
	var matrix []string
	for _, line := range regexp.MustCompile(`(?m)^.*(VMGUEST|MATRIX|--- |PASS|FAIL|panic|probes:|attached|fallback|unavailable).*$`).FindAllString(console, -1) {
		line = strings.TrimSpace(line)
		t.Log(line)
		if strings.HasPrefix(line, "MATRIX ") {
			matrix = append(matrix, line)
		}
	}
	fmt.Printf("MATRIX-TIME run=%s boot+test=%.1fs\n", name, took.Seconds())
	saveMatrix(t, matrix)
	matrixRuns[name] = matrix
	if err != nil || !suitePassed(console) {
		t.Logf("console tail:\n%s", tail(console, 40))
		t.Fatalf("%s: the matrix suite did not pass (%v) in %.1fs", name, err, took.Seconds())
	}
	return true
}

// suitePassed reports whether the console holds the suite's own PASS
// verdict (not a subtest's) and no FAIL: a kernel that panics after that
// verdict does not fail the row, one that panics before it does.
func suitePassed(console string) bool {
	return regexp.MustCompile(`(?m)^--- PASS: TestVMGuest \(`).MatchString(console) &&
		!regexp.MustCompile(`(?m)^\s*--- FAIL`).MatchString(console)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// saveMatrix appends MATRIX lines to $DRAINWATCH_MATRIX_OUT.
func saveMatrix(t *testing.T, lines []string) {
	path := os.Getenv("DRAINWATCH_MATRIX_OUT")
	if path == "" || len(lines) == 0 {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, strings.Join(lines, "\n"))
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

// TestSuitePassed: only the suite's own PASS verdict passes a row; a
// subtest's PASS, a FAIL, or a panic before the verdict does not.
func TestSuitePassed(t *testing.T) {
	for console, want := range map[string]bool{
		"=== RUN   TestVMGuest\r\n--- PASS: TestVMGuest (7.83s)\r\nPASS\r\n[ 9.1] Kernel panic - not syncing: Attempted to kill init!\r\n": true,
		"=== RUN   TestVMGuest\r\n    --- PASS: TestVMGuest/accepts (1.00s)\r\n[ 9.1] Kernel panic - not syncing: Fatal exception\r\n":     false,
		"=== RUN   TestVMGuest\r\n    --- FAIL: TestVMGuest/resets (1.00s)\r\n--- PASS: TestVMGuest (7.83s)\r\n":                           false,
		"=== RUN   TestVMGuest\r\n--- FAIL: TestVMGuest (7.83s)\r\nFAIL\r\n":                                                               false,
	} {
		if got := suitePassed(console); got != want {
			t.Errorf("suitePassed(%q) = %v, want %v", console, got, want)
		}
	}
}
