package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/collector/node"
)

// doctorEnv is everything the checks read from the node, so a test can
// replace one input (a capability set, a tracefs path) without breaking the
// machine it runs on.
type doctorEnv struct {
	kernelRelease string
	btfPath       string
	tracefsPath   string
	bpffsPath     string
	pinPath       string
	cgroupRoot    string // empty: found from mountinfo
	nodeName      string
	capEff        func() (uint64, error)
	fsMagic       func(path string) (int64, error)
	probes        func() ([]kernel.ProbeStatus, error)
	// kube returns the API configuration, nil when there is none to check.
	kube func() (*rest.Config, string, error)
}

func hostEnv(f doctorFlags) doctorEnv {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return doctorEnv{
		kernelRelease: unix.ByteSliceToString(u.Release[:]),
		btfPath:       "/sys/kernel/btf/vmlinux",
		tracefsPath:   "/sys/kernel/tracing",
		bpffsPath:     pinFilesystem(f.pinPath),
		pinPath:       f.pinPath,
		cgroupRoot:    f.cgroupRoot,
		nodeName:      f.nodeName,
		capEff:        kernel.EffectiveCaps,
		fsMagic:       statfsMagic,
		probes:        loadProbes,
		kube:          func() (*rest.Config, string, error) { return kubeConfig(f.kubeconfig) },
	}
}

// pinFilesystem is where the pins' filesystem is checked: the pin path or
// its nearest existing parent (the DaemonSet mounts only the pin directory
// of the host's bpffs), else /sys/fs/bpf.
func pinFilesystem(pinPath string) string {
	for p := filepath.Clean(pinPath); pinPath != "" && p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/sys/fs/bpf"
}

// runChecks runs every check in the order a user fixes them.
func runChecks(env doctorEnv) []checkResult {
	rs := []checkResult{checkKernel(env.kernelRelease), checkBTF(env.btfPath)}
	rs = append(rs, checkCapabilities(env)...)
	rs = append(rs,
		checkMount("tracefs", env.tracefsPath, unix.TRACEFS_MAGIC, env.fsMagic, checkWarn,
			"mount -t tracefs tracefs /sys/kernel/tracing (operators read it; the tp_btf programs do not need it)"),
		checkMount("bpffs", env.bpffsPath, unix.BPF_FS_MAGIC, env.fsMagic, checkFail,
			"mount -t bpf bpf /sys/fs/bpf on the host and mount the pin directory into the pod (hostPath /sys/fs/bpf/drainwatch)"),
		checkPinPath(env.pinPath),
		checkCgroup2(env.cgroupRoot),
		checkNodeName(env.nodeName),
	)
	rs = append(rs, checkProbes(env.probes)...)
	return append(rs, checkKube(env.kube)...)
}

// minKernel: the BPF ring buffer and CAP_BPF/CAP_PERFMON need 5.8.
const minKernelMajor, minKernelMinor = 5, 8

// kernelAtLeast reports whether release ("6.1.0-18-amd64") is at least
// major.minor; an unreadable one is not.
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func checkKernel(release string) checkResult {
	r := checkResult{Check: "kernel", Status: checkOK, Detail: release}
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		r.Status, r.Detail = checkFail, fmt.Sprintf("cannot read the kernel version %q", release)
		return r
	}
	if !kernelAtLeast(release, minKernelMajor, minKernelMinor) {
		r.Status = checkFail
		r.Detail += ": older than 5.8 (no BPF ring buffer, no CAP_BPF)"
		r.Fix = "run the node on Linux >= 5.8 (>= 6.10 for every RST reason)"
	}
	return r
}

func checkBTF(path string) checkResult {
	if _, err := os.Stat(path); err != nil {
		return checkResult{Check: "btf", Status: checkFail, Detail: err.Error(),
			Fix: "a kernel built with CONFIG_DEBUG_INFO_BTF=y, and /sys/kernel/btf mounted into the pod (hostPath)"}
	}
	return checkResult{Check: "btf", Status: checkOK, Detail: path}
}

// neededCaps are the DaemonSet's capabilities; the first two are required
// to load and attach, the others degrade the daemon without them.
var neededCaps = []struct {
	name string
	bit  uint
	miss string // status when missing
	why  string
}{
	{"CAP_BPF", 39, checkFail, "load the programs and create their maps"},
	{"CAP_PERFMON", 38, checkFail, "attach the tracing programs and read kernel memory"},
	{"CAP_SYS_RESOURCE", 24, checkWarn, "raise RLIMIT_MEMLOCK (kernels before 5.11)"},
}

const capSysAdminBit = 21

func checkCapabilities(env doctorEnv) []checkResult {
	eff, err := env.capEff()
	if err != nil {
		return []checkResult{{Check: "capabilities", Status: checkFail, Detail: err.Error(), Fix: "run on Linux with /proc mounted"}}
	}
	var rs []checkResult
	for _, c := range neededCaps {
		r := checkResult{Check: "capability " + c.name, Status: checkOK, Detail: "effective"}
		if eff&(1<<c.bit) == 0 {
			r.Status, r.Detail = c.miss, "not effective: cannot "+c.why
			if eff&(1<<capSysAdminBit) != 0 && c.bit != 24 {
				r.Status, r.Detail = checkOK, "not effective, CAP_SYS_ADMIN covers it"
			}
			if c.bit == 24 && kernelAtLeast(env.kernelRelease, 5, 11) {
				r.Status, r.Detail = checkOK, "not effective, not needed on Linux >= 5.11 (BPF memory is charged to the cgroup)"
			}
			if r.Status != checkOK {
				r.Fix = fmt.Sprintf("add %s to securityContext.capabilities.add and run as uid 0 (effective %#x)", strings.TrimPrefix(c.name, "CAP_"), eff)
			}
		}
		rs = append(rs, r)
	}
	return rs
}

func checkMount(name, path string, magic int64, fsMagic func(string) (int64, error), missing, fix string) checkResult {
	got, err := fsMagic(path)
	switch {
	case err != nil:
		return checkResult{Check: name, Status: missing, Detail: fmt.Sprintf("%s: %v", path, err), Fix: fix}
	case got != magic:
		return checkResult{Check: name, Status: missing, Detail: fmt.Sprintf("%s is not %s (filesystem magic %#x)", path, name, got), Fix: fix}
	}
	return checkResult{Check: name, Status: checkOK, Detail: path}
}

// checkPinPath creates and removes a directory under the pin path, as the
// daemon does at start; a read-only bpffs mount or an LSM denies it here.
func checkPinPath(pin string) checkResult {
	r := checkResult{Check: "pin path", Status: checkOK}
	if pin == "" {
		r.Status, r.Detail = checkWarn, "empty: nothing pinned, a daemon restart leaves a gap"
		r.Fix = "--pin-path=/sys/fs/bpf/drainwatch"
		return r
	}
	// bpffs refuses names with a dot; the pid keeps two doctors apart.
	probe := filepath.Join(pin, fmt.Sprintf("doctor_%d", os.Getpid()))
	err := os.MkdirAll(probe, 0o700)
	if err == nil {
		err = os.Remove(probe)
	}
	if err != nil {
		r.Status, r.Detail = checkFail, fmt.Sprintf("%s not writable: %v", pin, err)
		r.Fix = "mount /sys/fs/bpf read-write (hostPath, no readOnly); on AppArmor hosts (Ubuntu) set the container's appArmorProfile to Unconfined"
		return r
	}
	r.Detail = pin + " writable"
	return r
}

func checkCgroup2(root string) checkResult {
	r := checkResult{Check: "cgroup v2", Status: checkOK}
	if root == "" {
		var err error
		if root, err = node.Cgroup2Mount(); err != nil {
			r.Status, r.Detail = checkFail, err.Error()
			r.Fix = "boot the node with the unified cgroup hierarchy (systemd.unified_cgroup_hierarchy=1) and mount /sys/fs/cgroup (hostPath)"
			return r
		}
	}
	if _, err := node.CgroupID(root); err != nil {
		r.Status, r.Detail = checkFail, err.Error()
		r.Fix = "mount the host's /sys/fs/cgroup into the pod (hostPath), or set --cgroup-root"
		return r
	}
	r.Detail = root
	return r
}

func checkNodeName(node string) checkResult {
	if node == "" {
		return checkResult{Check: "node name", Status: checkFail, Detail: "empty",
			Fix: "set NODE_NAME from the downward API (env valueFrom.fieldRef.fieldPath: spec.nodeName) or --node-name"}
	}
	return checkResult{Check: "node name", Status: checkOK, Detail: node}
}

// loadProbes loads and attaches the programs as `drainwatch trace` does
// (nothing pinned, no scope watched), reads their states and detaches them.
func loadProbes() ([]kernel.ProbeStatus, error) {
	k, err := kernel.Open(kernel.Options{Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	probes := k.Probes()
	return probes, k.Close()
}

func checkProbes(load func() ([]kernel.ProbeStatus, error)) []checkResult {
	probes, err := load()
	if err != nil && len(probes) == 0 {
		fix := "see the capability lines above"
		if errors.Is(err, unix.EPERM) || strings.Contains(err.Error(), "operation not permitted") {
			fix = "bpf(2) was denied: grant CAP_BPF and CAP_PERFMON; under containerd < 1.7 the RuntimeDefault seccomp profile denies bpf(2) without CAP_SYS_ADMIN: use seccompProfile Unconfined or a Localhost profile allowing bpf and perf_event_open"
		}
		return []checkResult{{Check: "probes", Status: checkFail, Detail: err.Error(), Fix: fix}}
	}
	var rs []checkResult
	for _, p := range probes {
		r := checkResult{Check: "probe " + p.Name, Status: checkOK, Detail: string(p.State) + " " + p.Hook}
		switch p.State {
		case kernel.ProbeFallback, kernel.ProbeDetached:
			r.Detail += ": " + p.Detail
		case kernel.ProbeUnavailable:
			r.Status, r.Detail = checkFail, r.Detail+": "+p.Detail
			if p.Optional { // the message probes: HTTP/2 streams only
				r.Status = checkWarn
			}
			r.Fix = "a kernel with this tracepoint in BTF (Linux >= 5.8); see the daemon's eBPF probe log line"
		}
		rs = append(rs, r)
	}
	return rs
}

func statfsMagic(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}
