package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/rlimit"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

const kernelBTFPath = "/sys/kernel/btf/vmlinux"

// Capabilities that let a non-root process load tracing programs.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// preflight turns the usual reasons eBPF cannot load into errors a user can
// act on, before the verifier or the kernel return a bare EPERM.
func preflight(log zerolog.Logger, pinPath string) error {
	if err := checkCapabilities(); err != nil {
		return err
	}
	if _, err := os.Stat(kernelBTFPath); err != nil {
		return fmt.Errorf("kernel BTF is missing (%v): drainwatch needs a kernel built with CONFIG_DEBUG_INFO_BTF=y", err)
	}
	// tp_btf programs and the task iterator need no tracefs (their hooks
	// are named by BTF), and bpffs only for the pins. A pin path already on
	// bpffs (the DaemonSet mounts only /sys/fs/bpf/drainwatch) needs no
	// mount; on a host without bpffs, mount it and say how when that fails.
	if pinPath != "" && !onBPFFS(pinPath) {
		ensureMounted(log, "/sys/fs/bpf", "bpf", "bpffs")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return fmt.Errorf("raising RLIMIT_MEMLOCK for BPF maps: %w", err)
	}
	return nil
}

func checkCapabilities() error {
	eff, err := EffectiveCaps()
	if err != nil {
		return err
	}
	return capsSuffice(eff)
}

// capsSuffice says which capabilities are missing, if any.
func capsSuffice(eff uint64) error {
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	return fmt.Errorf("drainwatch needs root, or CAP_BPF and CAP_PERFMON (effective capabilities %#x, uid %d): run it with sudo or grant them", eff, os.Geteuid())
}

// EffectiveCaps reads this process's effective capabilities (CapEff of
// /proc/self/status): the loader's preflight and `drainwatch doctor` check
// the same bits.
func EffectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading capabilities: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("reading capabilities: no CapEff in /proc/self/status")
}

// onBPFFS reports whether path, or its nearest existing parent, is on bpffs.
func onBPFFS(path string) bool {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			return st.Type == unix.BPF_FS_MAGIC
		}
		if p == "/" || p == "." {
			return false
		}
	}
}

func ensureMounted(log zerolog.Logger, dir, fstype, name string) {
	var st unix.Statfs_t
	magic := map[string]int64{"tracefs": unix.TRACEFS_MAGIC, "bpf": unix.BPF_FS_MAGIC}[fstype]
	if unix.Statfs(dir, &st) == nil && st.Type == magic {
		return
	}
	if err := unix.Mount(fstype, dir, fstype, 0, ""); err != nil {
		log.Warn().Err(err).Msgf("%s is not mounted at %s and mounting it failed: mount -t %s %s %s", name, dir, fstype, fstype, dir)
		return
	}
	log.Info().Str("path", dir).Msgf("mounted %s", name)
}
