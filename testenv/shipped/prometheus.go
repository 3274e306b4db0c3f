package shipped

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/testenv/gotools"
)

// Target is a daemon for Prometheus: its node and its address.
type Target struct{ Node, Addr string }

// PrometheusConfig is the Prometheus Operator's configuration for the
// chart's PodMonitor (opconfig: the generator of the operator's own module,
// its TLS CA and the scraper's token read from the API server), with
// ruleFiles. Only the discovery is a stand-in: the daemons run as
// processes, not pods, so each job's kubernetes_sd_configs become a
// file_sd group per target carrying the meta labels Kubernetes discovery
// gives a DaemonSet pod on that node, which the operator's relabelling then
// keeps and turns into the node, pod and namespace labels.
func (in *Install) PrometheusConfig(ctx context.Context, targets []Target, ruleFiles []string) ([]byte, error) {
	opconfig, err := gotools.Path("opconfig-"+gotools.OperatorVersion, "opconfig", "make opconfig")
	if err != nil {
		return nil, err
	}
	pm, err := in.objects["PodMonitor/"+Release].MarshalJSON()
	if err != nil {
		return nil, err
	}
	pmFile := filepath.Join(in.Dir, "podmonitor.json")
	if err := os.WriteFile(pmFile, pm, 0o600); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, opconfig, "-prometheus-version", "v2.42.0", "-scrape-interval", "1s",
		"-kubeconfig", in.cp.Kubeconfig, "-tls-assets-dir", filepath.Join(in.Dir, "certs"), pmFile).Output()
	if err != nil {
		return nil, fmt.Errorf("opconfig %s: %w", pmFile, stderrOf(err))
	}
	sd := filepath.Join(in.Dir, "targets.json")
	if err := writeTargets(sd, targets); err != nil {
		return nil, err
	}
	return withFileSD(out, sd, ruleFiles)
}

func stderrOf(err error) error {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

// writeTargets writes the file_sd groups: what kubernetes_sd_configs
// (role pod) reports for the DaemonSet's pod of each node.
func writeTargets(file string, targets []Target) error {
	groups := make([]map[string]any, len(targets))
	for i, t := range targets {
		groups[i] = map[string]any{"targets": []string{t.Addr}, "labels": map[string]string{
			"__meta_kubernetes_namespace":                               Namespace,
			"__meta_kubernetes_pod_name":                                Release + "-" + t.Node,
			"__meta_kubernetes_pod_node_name":                           t.Node,
			"__meta_kubernetes_pod_phase":                               "Running",
			"__meta_kubernetes_pod_ready":                               "true",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name":        "drainwatch",
			"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name": "true",
			"__meta_kubernetes_pod_container_name":                      "drainwatch",
			"__meta_kubernetes_pod_container_port_name":                 "metrics",
			"__meta_kubernetes_pod_container_init":                      "false",
		}}
	}
	data, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}

// withFileSD replaces every job's kubernetes_sd_configs by file_sd_configs
// of sd and adds the rule files.
func withFileSD(cfg []byte, sd string, ruleFiles []string) ([]byte, error) {
	var c map[string]any
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("parsing the operator's configuration: %w", err)
	}
	jobs, _ := c["scrape_configs"].([]any)
	if len(jobs) == 0 {
		return nil, fmt.Errorf("the operator's configuration has no scrape job:\n%s", cfg)
	}
	for _, j := range jobs {
		job := j.(map[string]any)
		delete(job, "kubernetes_sd_configs")
		job["file_sd_configs"] = []any{map[string]any{"files": []string{sd}, "refresh_interval": "1s"}}
	}
	if len(ruleFiles) > 0 {
		c["rule_files"] = ruleFiles
	}
	return yaml.Marshal(c)
}
