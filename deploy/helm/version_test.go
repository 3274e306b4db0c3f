package helm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// TestDefaultImageTagIsARelease: the chart installs the image of its
// appVersion, a release version (vX.Y.Z), never "latest"; the kustomize
// base's tag is the same (TestDefaultRenderingIsTheKustomizeBase).
func TestDefaultImageTagIsARelease(t *testing.T) {
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(readFile(t, "drainwatch/Chart.yaml"), &chart); err != nil {
		t.Fatal(err)
	}
	if !releaseTag.MatchString(chart.AppVersion) || "v"+chart.Version != chart.AppVersion {
		t.Errorf("Chart.yaml version %q appVersion %q: want vX.Y.Z and its X.Y.Z (make release-version)", chart.Version, chart.AppVersion)
	}
	ds := objects(t, template(t))["DaemonSet/drainwatch"]
	c := field(t, ds, "spec", "template", "spec").(map[string]any)["containers"].([]any)[0].(map[string]any)
	if want := "ghcr.io/drainwatch/drainwatch:" + chart.AppVersion; c["image"] != want {
		t.Errorf("default image %v, want %s", c["image"], want)
	}
}

// TestReleaseVersionSetsTheTag: `make release-version VERSION=...`'s script
// writes the chart's appVersion and version and the base's newTag, and
// refuses anything but vX.Y.Z ("latest" included).
func TestReleaseVersionSetsTheTag(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"deploy/helm/drainwatch/Chart.yaml", "deploy/daemonset/base/kustomization.yaml"} {
		mustCopy(t, filepath.Join("../..", f), filepath.Join(root, f))
	}
	script := "../../tools/scripts/set-version.sh"
	if out, err := exec.Command("bash", script, "v9.8.7", root).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	chart, _ := os.ReadFile(filepath.Join(root, "deploy/helm/drainwatch/Chart.yaml"))
	base, _ := os.ReadFile(filepath.Join(root, "deploy/daemonset/base/kustomization.yaml"))
	if !regexp.MustCompile(`(?m)^version: 9\.8\.7$`).Match(chart) || !regexp.MustCompile(`(?m)^appVersion: "v9\.8\.7"$`).Match(chart) ||
		!regexp.MustCompile(`(?m)^    newTag: v9\.8\.7$`).Match(base) {
		t.Errorf("after set-version.sh v9.8.7:\n%s\n%s", chart, base)
	}
	if out, err := exec.Command("bash", script, "latest", root).CombinedOutput(); err == nil {
		t.Errorf("set-version.sh latest succeeded: %s", out)
	}
}

func mustCopy(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
