// Package daemonset_test checks the kustomize base and overlay: every
// manifest parses strictly into its typed object, the DaemonSet holds only
// the privileges its comments justify, and the PrometheusRule carries the
// same alerts as deploy/prometheus/alerts.yaml.
package daemonset_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/daemon"
)

// typed returns an empty typed object for a built-in kind.
func typed(kind string) any {
	switch kind {
	case "Namespace":
		return &corev1.Namespace{}
	case "ServiceAccount":
		return &corev1.ServiceAccount{}
	case "Service":
		return &corev1.Service{}
	case "DaemonSet":
		return &appsv1.DaemonSet{}
	case "ClusterRole":
		return &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	}
	return nil
}

// kustomization is the part of kustomization.yaml these tests read.
type kustomization struct {
	Resources []string `json:"resources"`
}

// loadBase parses every resource of the base strictly, keyed by kind.
func loadBase(t *testing.T) map[string][]any {
	t.Helper()
	var k kustomization
	readYAML(t, "base/kustomization.yaml", &k)
	objs := map[string][]any{}
	for _, file := range k.Resources {
		data, err := os.ReadFile(filepath.Join("base", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			obj := typed(tm.Kind)
			if obj == nil {
				t.Fatalf("%s: unexpected kind %q in the base", file, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: %s does not parse strictly: %v", file, tm.Kind, err)
			}
			objs[tm.Kind] = append(objs[tm.Kind], obj)
		}
	}
	return objs
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestBaseParsesIntoTypedObjects(t *testing.T) {
	objs := loadBase(t)
	want := map[string]int{"Namespace": 1, "ServiceAccount": 1, "Service": 1, "DaemonSet": 1, "ClusterRole": 3,
		"ClusterRoleBinding": 1, "NetworkPolicy": 1}
	for kind, n := range want {
		if len(objs[kind]) != n {
			t.Errorf("%d %s objects, want %d", len(objs[kind]), kind, n)
		}
	}
}

func TestDaemonSetLeastPrivilege(t *testing.T) {
	ds := loadBase(t)["DaemonSet"][0].(*appsv1.DaemonSet)
	pod := ds.Spec.Template.Spec
	if !pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Errorf("hostPID=%v hostNetwork=%v hostIPC=%v, want only hostPID", pod.HostPID, pod.HostNetwork, pod.HostIPC)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the container must be unprivileged without privilege escalation")
	}
	// Unconfined AppArmor: the runtime's default profile denies the bpffs
	// writes that pin the programs (what Cilium's chart does too).
	if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		t.Errorf("appArmorProfile %+v, want Unconfined", sc.AppArmorProfile)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("livenessProbe %+v, want GET /healthz", p)
	}
	// No SYS_PTRACE: pods' network namespaces are read from their tasks
	// in BPF (collector/kernel ProcessNetns), never /proc/<pid>/ns/net.
	want := []corev1.Capability{"BPF", "PERFMON", "SYS_RESOURCE"}
	if slices.Contains(sc.Capabilities.Add, "SYS_PTRACE") || slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") {
		t.Errorf("capabilities add %v: neither SYS_PTRACE nor SYS_ADMIN is needed", sc.Capabilities.Add)
	}
	if !reflect.DeepEqual(sc.Capabilities.Add, want) || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities add %v drop %v, want add %v drop [ALL]", sc.Capabilities.Add, sc.Capabilities.Drop, want)
	}
	wantArgs := []string{"run", "--node-name=$(NODE_NAME)", "--listen=:9090", "--state-dir=/var/lib/drainwatch",
		"--auth=kubernetes", "--tls-cert-file=/etc/drainwatch/tls/tls.crt", "--tls-key-file=/etc/drainwatch/tls/tls.key"}
	if !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("args %v, want %v", c.Args, wantArgs)
	}
	if len(c.Env) != 2 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" ||
		c.Env[1].Name != "GOMEMLIMIT" || c.Env[1].ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName and GOMEMLIMIT from limits.memory", c.Env)
	}
	// The highest measured VmRSS is 87 MiB (docs/development/cost.md, "Memory"): the request
	// covers it with 10 %.
	if req := c.Resources.Requests.Memory(); req.Cmp(resource.MustParse("96Mi")) < 0 {
		t.Errorf("memory request %s, want at least 96Mi (the highest measured VmRSS, 87 MiB, plus 10 %%)", req)
	}
	if pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v, want kubernetes.io/os: linux", pod.NodeSelector)
	}
	readOnly := map[string]bool{}
	for _, m := range c.VolumeMounts {
		readOnly[m.MountPath] = m.ReadOnly
	}
	// Only drainwatch's own bpffs directory (the daemon's default pin
	// path), not every program's pins; no tracefs: every program is
	// tp_btf or a task iterator (collector/kernel/probes.go).
	// /sys/fs/bpf is an empty volume: the pin directory's mount point.
	wantRO := map[string]bool{"/sys/kernel/btf": true, "/sys/fs/cgroup": true, "/sys/fs/bpf": false,
		daemon.DefaultPinPath: false, "/var/lib/drainwatch": false, "/etc/drainwatch/tls": true}
	if !reflect.DeepEqual(readOnly, wantRO) {
		t.Errorf("mounts (path: readOnly) %v, want %v", readOnly, wantRO)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		switch {
		case v.HostPath != nil:
			hostPaths[v.HostPath.Path] = string(*v.HostPath.Type)
		case v.Secret != nil:
			// The serving certificate (auth and TLS on by default),
			// mounted read-only above.
			if v.Secret.SecretName != "drainwatch-tls" {
				t.Errorf("volume %s: Secret %s, want only the serving certificate drainwatch-tls", v.Name, v.Secret.SecretName)
			}
		case v.EmptyDir == nil:
			t.Errorf("volume %s: neither hostPath, the TLS Secret nor emptyDir", v.Name)
		}
	}
	wantHost := map[string]string{"/sys/kernel/btf": "Directory", "/sys/fs/cgroup": "Directory",
		daemon.DefaultPinPath: "DirectoryOrCreate", "/var/lib/drainwatch": "DirectoryOrCreate"}
	if !reflect.DeepEqual(hostPaths, wantHost) {
		t.Errorf("hostPath volumes (path: type) %v, want %v", hostPaths, wantHost)
	}
	// Root for the capabilities (a non-root user loses them at exec: no
	// ambient set from the runtime, no file capabilities under no_new_privs).
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("runAsUser %v, want 0 (the capabilities need it)", sc.RunAsUser)
	}
}

func TestRBACReadsOnlyWhatItNeeds(t *testing.T) {
	role := loadBase(t)["ClusterRole"][0].(*rbacv1.ClusterRole)
	writes := []string{"create", "update", "patch", "delete", "deletecollection", "*"}
	// Reviews are created and answered, never stored.
	reviews := []string{"tokenreviews", "subjectaccessreviews"}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "*" || res == "secrets" || res == "configmaps" {
				t.Errorf("rule grants %q", res)
			}
			for _, v := range r.Verbs {
				if slices.Contains(writes, v) && res != "events" && !(v == "create" && slices.Contains(reviews, res)) {
					t.Errorf("rule grants %s on %s: only events are written", v, res)
				}
			}
		}
	}
}

// TestPrometheusRuleMatchesAlerts keeps the overlay's PrometheusRule equal to
// the promtool-tested rule file.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	var plain struct {
		Groups []any `json:"groups"`
	}
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	readYAML(t, "../prometheus/alerts.yaml", &plain)
	readYAML(t, "overlays/prometheus-operator/prometheusrule.yaml", &crd)
	if crd.Kind != "PrometheusRule" || len(plain.Groups) == 0 || !reflect.DeepEqual(plain.Groups, crd.Spec.Groups) {
		t.Errorf("overlays/prometheus-operator/prometheusrule.yaml differs from deploy/prometheus/alerts.yaml: regenerate it")
	}
}

func TestPodMonitorSelectsTheDaemon(t *testing.T) {
	var pm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector            metav1.LabelSelector `json:"selector"`
			PodMetricsEndpoints []struct {
				Port        string `json:"port"`
				Path        string `json:"path"`
				HonorLabels bool   `json:"honorLabels"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	readYAML(t, "overlays/prometheus-operator/podmonitor.yaml", &pm)
	ds := loadBase(t)["DaemonSet"][0].(*appsv1.DaemonSet)
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if pm.Kind != "PodMonitor" || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) ||
		pm.Spec.PodMetricsEndpoints[0].Port != ds.Spec.Template.Spec.Containers[0].Ports[0].Name ||
		pm.Spec.PodMetricsEndpoints[0].Path != "/metrics" || !pm.Spec.PodMetricsEndpoints[0].HonorLabels {
		t.Errorf("PodMonitor %+v does not scrape the DaemonSet's metrics port with honorLabels", pm)
	}
	// kube-prometheus-stack selects PodMonitors by its release label.
	if pm.Metadata.Labels["release"] == "" {
		t.Errorf("PodMonitor labels %v: no release label", pm.Metadata.Labels)
	}
}
