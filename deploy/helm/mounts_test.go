package helm_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drainwatch/drainwatch/testenv/gotools"
)

// TestPinPathIsTheOnlyBPFFSMount: the pod mounts the pin directory of the
// host's bpffs (pinPath), at the same path inside an empty /sys/fs/bpf
// (its mount point), and nothing else of bpffs or tracefs; a pinPath
// outside /sys/fs/bpf/ does not render.
func TestPinPathIsTheOnlyBPFFSMount(t *testing.T) {
	for _, tc := range []struct{ pinPath, want string }{{"", "/sys/fs/bpf/drainwatch"}, {"/sys/fs/bpf/dw", "/sys/fs/bpf/dw"}} {
		ds := objects(t, template(t, "--set", "pinPath="+tc.pinPath))["DaemonSet/drainwatch"]
		pod := field(t, ds, "spec", "template", "spec").(map[string]any)
		c := pod["containers"].([]any)[0].(map[string]any)
		var mounts, hostPaths []string
		for _, m := range c["volumeMounts"].([]any) {
			mounts = append(mounts, m.(map[string]any)["mountPath"].(string))
		}
		for _, v := range pod["volumes"].([]any) {
			if hp, ok := v.(map[string]any)["hostPath"].(map[string]any); ok {
				hostPaths = append(hostPaths, hp["path"].(string)+" "+hp["type"].(string))
			}
		}
		// The serving certificate's Secret (auth on by default) is the
		// last mount; it is no hostPath.
		wantMounts := []string{"/sys/kernel/btf", "/sys/fs/cgroup", "/sys/fs/bpf", tc.want, "/var/lib/drainwatch", "/etc/drainwatch/tls"}
		wantHost := []string{"/sys/kernel/btf Directory", "/sys/fs/cgroup Directory", tc.want + " DirectoryOrCreate", "/var/lib/drainwatch DirectoryOrCreate"}
		if !cmp.Equal(mounts, wantMounts) || !cmp.Equal(hostPaths, wantHost) {
			t.Errorf("pinPath %q: mounts %v, hostPaths %v; want %v, %v", tc.pinPath, mounts, hostPaths, wantMounts, wantHost)
		}
	}
	out, err := exec.Command(gotools.Helm(t), "template", release, chart, "--set", "pinPath=/var/lib/pins").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "must be a directory under /sys/fs/bpf/") {
		t.Errorf("pinPath=/var/lib/pins rendered (%v): %s", err, out)
	}
}
