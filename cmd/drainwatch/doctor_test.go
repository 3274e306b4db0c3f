package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// fakeEnv is a node where everything is in order, without touching it.
func fakeEnv() doctorEnv {
	return doctorEnv{
		kernelRelease: "6.1.0-18-amd64", btfPath: "/dev/null", tracefsPath: "/sys/kernel/tracing",
		bpffsPath: "/sys/fs/bpf", pinPath: "", cgroupRoot: "/", nodeName: "node-a",
		capEff: func() (uint64, error) { return 1<<39 | 1<<38 | 1<<24 | 1<<19, nil },
		fsMagic: func(p string) (int64, error) {
			return map[string]int64{"/sys/kernel/tracing": 0x74726163, "/sys/fs/bpf": 0xcafe4a11}[p], nil
		},
		probes: func() ([]kernel.ProbeStatus, error) {
			return []kernel.ProbeStatus{{Name: "refused", Hook: "tp_btf/kfree_skb", State: kernel.ProbeFallback, Detail: "Linux < 6.10"}}, nil
		},
		kube: func() (*rest.Config, string, error) { return nil, "", nil },
	}
}

func find(t *testing.T, rs []checkResult, check string) checkResult {
	t.Helper()
	for _, r := range rs {
		if r.Check == check {
			return r
		}
	}
	t.Fatalf("no %q line in %+v", check, rs)
	return checkResult{}
}

// TestDoctorInjectedFailures: a missing CAP_BPF fails its line with the
// fix, a missing tracefs warns with the mount command, and exit is 1.
func TestDoctorInjectedFailures(t *testing.T) {
	env := fakeEnv()
	if rs := runChecks(env); exitCode(rs) != 0 {
		t.Fatalf("the fake good node fails: %+v", rs)
	}
	env.capEff = func() (uint64, error) { return 1<<38 | 1<<19, nil }
	env.tracefsPath = "/nonexistent/tracing"
	env.fsMagic = func(p string) (int64, error) {
		if p == "/nonexistent/tracing" {
			return 0, os.ErrNotExist
		}
		return fakeEnv().fsMagic(p)
	}
	rs := runChecks(env)
	if r := find(t, rs, "capability CAP_BPF"); r.Status != checkFail || !strings.Contains(r.Fix, "add BPF to securityContext.capabilities.add") {
		t.Errorf("CAP_BPF line %+v", r)
	}
	if r := find(t, rs, "tracefs"); r.Status != checkWarn || !strings.Contains(r.Fix, "mount -t tracefs") {
		t.Errorf("tracefs line %+v", r)
	}
	if r := find(t, rs, "probe refused"); r.Status != checkOK || !strings.HasPrefix(r.Detail, "fallback tp_btf/kfree_skb") {
		t.Errorf("fallback probe line %+v", r)
	}
	if r := find(t, rs, "api"); r.Status != checkSkip {
		t.Errorf("api line %+v", r)
	}
	if exitCode(rs) != 1 {
		t.Fatal("exit 0 with CAP_BPF missing")
	}
	var buf bytes.Buffer
	if err := writeResults(&buf, "json", rs); err != nil {
		t.Fatal(err)
	}
	var got struct {
		OK     bool
		Checks []checkResult
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got.OK || len(got.Checks) != len(rs) {
		t.Fatalf("json %s: %v", buf.String(), err)
	}
}

// TestDoctorProbesDenied: a bpf(2) EPERM names seccomp and the capabilities.
func TestDoctorProbesDenied(t *testing.T) {
	rs := checkProbes(func() ([]kernel.ProbeStatus, error) {
		return nil, errors.New("loading BPF programs: operation not permitted")
	})
	if len(rs) != 1 || rs[0].Status != checkFail || !strings.Contains(rs[0].Fix, "seccomp") {
		t.Fatalf("%+v", rs)
	}
}

// TestDoctorHost: on this machine, as root, every check passes (the API
// one is skipped: no kubeconfig), the probes loaded and unloaded for real.
func TestDoctorHost(t *testing.T) {
	privileged.RequireRoot(t)
	privileged.RequireFile(t, "/sys/kernel/btf/vmlinux", "kernel BTF")
	f, err := parseDoctorFlags([]string{"--node-name", "test-node", "--kubeconfig", "", "--pin-path", "/sys/fs/bpf/drainwatch-doctor-test"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	rs := runChecks(hostEnv(f))
	var buf bytes.Buffer
	writeResults(&buf, "text", rs)
	t.Logf("drainwatch doctor:\n%s", buf.String())
	os.Remove("/sys/fs/bpf/drainwatch-doctor-test")
	if exitCode(rs) != 0 || len(rs) != 18 {
		t.Fatalf("%d lines, exit %d; want 18 lines and 0", len(rs), exitCode(rs))
	}
}

// TestDoctorRBACMatchesManifest: doctor asks for exactly what the
// ClusterRole grants.
func TestDoctorRBACMatchesManifest(t *testing.T) {
	role := manifestRole(t)
	var want []apiAccess
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			want = append(want, apiAccess{r.APIGroups[0], res, r.Verbs})
		}
	}
	if len(want) != len(neededAccess) {
		t.Fatalf("rbac.yaml has %d resources, doctor checks %d", len(want), len(neededAccess))
	}
	for i := range want {
		w, g := want[i], neededAccess[i]
		if w.group != g.group || w.resource != g.resource || strings.Join(w.verbs, ",") != strings.Join(g.verbs, ",") {
			t.Errorf("rule %d: manifest %+v, doctor %+v", i, w, g)
		}
	}
}

func manifestRole(t *testing.T) rbacv1.ClusterRole {
	b, err := os.ReadFile("../../deploy/daemonset/base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(bytes.Split(b, []byte("\n---\n"))[0], &role); err != nil {
		t.Fatal(err)
	}
	return role
}
