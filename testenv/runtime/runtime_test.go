package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/tools/oci"
)

const imageRef = "ghcr.io/drainwatch/drainwatch:test"

// TestImageUnderContainerd: the image, imported into Debian's containerd
// and run by runc with the DaemonSet's security context, passes doctor and
// counts exactly the refused connections a client netns made, and its
// `drainwatch run` against testenv's API server becomes ready and healthy.
func TestImageUnderContainerd(t *testing.T) {
	privileged.RequireRoot(t)
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			privileged.RequireFile(t, tool, "make deps installs containerd and runc")
		}
	}
	dir, err := os.MkdirTemp("", "dwctrd") // short: the socket path has a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	archive := buildImage(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	c, err := StartContainerd(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	if _, err := c.Ctr(ctx, "images", "import", "--all-platforms", archive); err != nil {
		t.Fatal(err)
	}
	flags := containerFlags(t, dir)
	checkSpec(t, ctx, c, flags[:len(flags)-2]) // ctr create has no --runc-binary
	out, err := c.Ctr(ctx, append(append([]string{"run", "--rm"}, flags...), imageRef, "doctor", "/usr/bin/drainwatch", "doctor", "--node-name", "test-node")...)
	t.Logf("drainwatch doctor in the container:\n%s", out)
	if err != nil || strings.Contains(string(out), "\nfail") {
		t.Fatalf("doctor failed in the container: %v", err)
	}
	traceRefused(t, ctx, c, flags)
	runReady(t, ctx, c, flags)
}

// buildImage builds the static binary and the image as make image does.
func buildImage(t *testing.T, dir string) string {
	bin := filepath.Join(dir, "drainwatch")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/drainwatch/drainwatch/cmd/drainwatch")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := oci.Config{Binaries: map[string]string{"amd64": bin}, Version: "test", Created: time.Unix(0, 0)}
	idx, err := oci.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := oci.Outputs(dir, cfg.Arches())
	if err := oci.Write(o, idx, imageRef); err != nil {
		t.Fatal(err)
	}
	return o.Archive
}

// containerFlags: the manifest's context, the state dir in dir, and the
// hostPID wrapper. A capability this machine's own bounding set lacks
// cannot be granted to any container here (runc: "unable to apply caps:
// operation not permitted"). The one the chart documents leaving out is
// SYS_RESOURCE (only kernels before 5.11 charge BPF maps to memlock: its
// `capabilities=["BPF","PERFMON"]` override, what a user of
// such a node sets): that override is applied, and said. Any other missing
// capability fails the test: the DaemonSet as shipped could not run here.
func containerFlags(t *testing.T, dir string) []string {
	ds, err := ReadDaemonSet(manifest)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state-dir")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// The serving certificate's Secret: trace does not serve, an empty
	// directory stands in for it.
	secret := filepath.Join(dir, "tls")
	if err := os.MkdirAll(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	flags, err := Flags(ds, map[string]string{"/var/lib/drainwatch": state, "secret:drainwatch-tls": secret})
	if err != nil {
		t.Fatal(err)
	}
	// hostPath DirectoryOrCreate (the pin directory): created as the
	// kubelet would.
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if hp := v.HostPath; hp != nil && hp.Type != nil && *hp.Type == corev1.HostPathDirectoryOrCreate && hp.Path != "/var/lib/drainwatch" {
			if err := os.MkdirAll(hp.Path, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	wrapper, err := WriteHostPIDWrapper(dir)
	if err != nil {
		t.Fatal(err)
	}
	bnd := boundingSet(t)
	var kept []string
	for i := 0; i < len(flags); i++ {
		if flags[i] == "--cap-add" && !bnd[flags[i+1]] {
			if flags[i+1] != "CAP_SYS_RESOURCE" || !kernelAtLeast511(t) {
				t.Fatalf("%s is not in this machine's bounding set: the shipped security context cannot run here, and no documented override leaves it out", flags[i+1])
			}
			t.Logf("%s is not in this machine's bounding set: applying the chart's documented override, capabilities=[BPF, PERFMON]", flags[i+1])
			i++
			continue
		}
		kept = append(kept, flags[i])
	}
	return append(kept, "--runc-binary", wrapper)
}

var capBits = map[string]uint{"CAP_BPF": 39, "CAP_PERFMON": 38, "CAP_SYS_RESOURCE": 24, "CAP_SYS_PTRACE": 19}

func boundingSet(t *testing.T) map[string]bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var bnd uint64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			if _, err := fmtSscanHex(strings.TrimSpace(v), &bnd); err != nil {
				t.Fatal(err)
			}
		}
	}
	set := map[string]bool{}
	for name, bit := range capBits {
		set[name] = bnd&(1<<bit) != 0
	}
	return set
}

// checkSpec creates (not starts) a container and checks the OCI spec is
// the one the CRI gives the manifest: exactly the granted capabilities,
// no new privileges, read-only root, uid 0, containerd's default seccomp
// profile allowing bpf and perf_event_open (it does so for CAP_BPF and
// CAP_PERFMON holders).
func checkSpec(t *testing.T, ctx context.Context, c *Containerd, flags []string) {
	if _, err := c.Ctr(ctx, append(append([]string{"containers", "create"}, flags...), imageRef, "spec", "/usr/bin/drainwatch")...); err != nil {
		t.Fatal(err)
	}
	defer c.Ctr(ctx, "containers", "rm", "spec")
	out, err := c.Ctr(ctx, "containers", "info", "spec")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Spec struct {
			Annotations map[string]string
			Process     struct {
				User            struct{ UID int }
				NoNewPrivileges bool
				Capabilities    map[string][]string
			}
			Root  struct{ Readonly bool }
			Linux struct {
				Seccomp *struct {
					DefaultAction string
					Syscalls      []struct {
						Names  []string
						Action string
					}
				}
			}
		}
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	s := info.Spec
	var want []string
	for i, f := range flags {
		if f == "--cap-add" {
			want = append(want, flags[i+1])
		}
	}
	for _, set := range []string{"bounding", "effective", "permitted"} {
		if strings.Join(s.Process.Capabilities[set], ",") != strings.Join(want, ",") {
			t.Errorf("%s capabilities %v, want %v", set, s.Process.Capabilities[set], want)
		}
	}
	if len(s.Process.Capabilities["inheritable"]) != 0 || len(s.Process.Capabilities["ambient"]) != 0 {
		t.Errorf("inheritable/ambient capabilities %v", s.Process.Capabilities)
	}
	// The image's USER is nonroot (65532); the wrapper applies the
	// manifest's runAsUser 0 at run time, as the CRI would at create.
	if s.Process.User.UID != 65532 || s.Annotations[runAsUserAnnotation] != "0" {
		t.Errorf("spec uid %d, runAsUser annotation %q; want the image's 65532, replaced by 0", s.Process.User.UID, s.Annotations[runAsUserAnnotation])
	}
	if !s.Process.NoNewPrivileges || !s.Root.Readonly || s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("spec: nnp %t readonly %t uid %d seccomp %v", s.Process.NoNewPrivileges, s.Root.Readonly, s.Process.User.UID, s.Linux.Seccomp)
	}
	allowed := map[string]bool{}
	for _, r := range s.Linux.Seccomp.Syscalls {
		for _, n := range r.Names {
			allowed[n] = allowed[n] || r.Action == "SCMP_ACT_ALLOW"
		}
	}
	if !allowed["bpf"] || !allowed["perf_event_open"] || allowed["mount"] {
		t.Fatalf("seccomp: bpf %t perf_event_open %t mount %t, want true true false", allowed["bpf"], allowed["perf_event_open"], allowed["mount"])
	}
}

// traceRefused runs drainwatch trace --netns in the container and makes n
// connection attempts to a closed port from a client netns.
func traceRefused(t *testing.T, ctx context.Context, c *Containerd, flags []string) {
	const n = 25
	client, server := newNS(t, "dwrt-cli"), newNS(t, "dwrt-srv")
	if err := netlab.Veth(netlab.End{NS: client, Name: "veth0", CIDR: "10.251.7.1/24"},
		netlab.End{NS: server, Name: "veth0", CIDR: "10.251.7.2/24"}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	args := append(append([]string{"run", "--rm"}, flags...), imageRef, "trace", "/usr/bin/drainwatch", "trace",
		"--netns", itoa(server.Inode()), "--format", "json")
	cmd := c.CtrCommand(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool { return strings.Contains(stderr.String(), "watching network namespace") }, &stderr)
	refused := 0
	for i := 0; i < n; i++ {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		conn, err := client.Dial(dctx, "tcp4", "10.251.7.2:9")
		cancel()
		if err == nil {
			conn.Close()
			t.Fatal("connected to the closed port")
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			refused++
		}
	}
	waitFor(t, 20*time.Second, func() bool { return strings.Count(stdout.String(), "\n") >= n }, &stderr)
	time.Sleep(500 * time.Millisecond) // anything beyond n would show up here
	if _, err := c.Ctr(ctx, "tasks", "kill", "trace"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("trace: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	got := strings.Count(stdout.String(), `"type":"refused"`)
	t.Logf("client saw %d refused; trace in the container printed %d events, %d refused; summary: %s", refused, len(lines), got, lastLines(stderr.String(), 3))
	if refused != n || got != n || len(lines) != n {
		t.Fatalf("client refused %d, trace %d refused of %d events; want %d each", refused, got, len(lines), n)
	}
}

// kernelAtLeast511 says whether this kernel charges BPF maps to the cgroup
// (5.11 on), where the chart documents leaving SYS_RESOURCE out.
func kernelAtLeast511(t *testing.T) bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	var major, minor int
	if _, err := fmt.Sscanf(b.String(), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", b.String(), err)
	}
	return major > 5 || major == 5 && minor >= 11
}
