// Command opconfig prints the Prometheus configuration that the Prometheus
// Operator generates for the PodMonitors it is given, with the operator's
// own config generator (github.com/prometheus-operator/prometheus-operator,
// pinned in this module's go.mod). A module of its own so the project's
// go.mod does not grow the operator's dependencies; the tests that use it
// run the binary testenv/scripts/build-gotool.sh caches in .cache/.
//
//	opconfig -prometheus-version v2.42.0 podmonitor.yaml... > prometheus.yml
//
// The operator runs in the cluster and so writes kubernetes_sd_configs
// without credentials; -kubeconfig adds kubeconfig_file to each of them so
// a Prometheus outside the cluster discovers the same targets (Debian's
// Prometheus has no Kubernetes discovery: testenv/k8ssd then runs
// Prometheus' own and writes file_sd_configs).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus-operator/prometheus-operator/pkg/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	version := flag.String("prometheus-version", "v2.42.0", "version of the Prometheus that loads the config")
	interval := flag.String("scrape-interval", "1s", "the Prometheus resource's scrapeInterval")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig_file for every kubernetes_sd_config (a Prometheus outside the cluster); the API server the referenced Secrets are read from")
	tlsAssets := flag.String("tls-assets-dir", "", "with -kubeconfig: write the TLS assets here (the operator's /etc/prometheus/certs) and name them there")
	flag.Parse()
	cfg, err := generate(flag.Args(), *version, *interval, *kubeconfig, *tlsAssets)
	if err == nil && *kubeconfig != "" {
		cfg, err = withKubeconfig(cfg, *kubeconfig)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "opconfig:", err)
		os.Exit(1)
	}
	os.Stdout.Write(cfg)
}

// generate runs the operator's ConfigGenerator for the PodMonitors in files.
func generate(files []string, version, interval, kubeconfig, tlsAssets string) ([]byte, error) {
	pMons, err := readPodMonitors(files)
	if err != nil {
		return nil, err
	}
	store, err := newStore(kubeconfig)
	if err != nil {
		return nil, err
	}
	if kubeconfig != "" {
		if err := loadAssets(context.Background(), store, pMons); err != nil {
			return nil, err
		}
	}
	p := &monitoringv1.Prometheus{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-prometheus-stack", Namespace: "monitoring"},
		Spec: monitoringv1.PrometheusSpec{CommonPrometheusFields: monitoringv1.CommonPrometheusFields{
			Version:        version,
			ScrapeInterval: monitoringv1.Duration(interval),
		}, EvaluationInterval: monitoringv1.Duration(interval)},
	}
	cg, err := prometheus.NewConfigGenerator(slog.New(slog.DiscardHandler), p)
	if err != nil {
		return nil, fmt.Errorf("config generator: %w", err)
	}
	cfg, err := cg.GenerateServerConfiguration(p, nil, pMons, nil, nil, store, nil, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("generating the configuration: %w", err)
	}
	if tlsAssets != "" {
		if cfg, err = writeAssets(cfg, store, tlsAssets); err != nil {
			return nil, err
		}
	}
	return expandEnv(cfg, p), nil
}

// expandEnv does what the operator's prometheus-config-reloader does before
// Prometheus reads the file: it expands $(SHARD) and $(POD_NAME) from the
// pod's environment (shard 0 of a single-shard Prometheus).
func expandEnv(cfg []byte, p *monitoringv1.Prometheus) []byte {
	cfg = bytes.ReplaceAll(cfg, []byte("$(SHARD)"), []byte("0"))
	return bytes.ReplaceAll(cfg, []byte("$(POD_NAME)"), []byte("prometheus-"+p.Name+"-0"))
}

// readPodMonitors parses every PodMonitor of the (multi-document) files,
// keyed namespace/name as the operator's resource selector keys them.
func readPodMonitors(files []string) (map[string]*monitoringv1.PodMonitor, error) {
	pMons := map[string]*monitoringv1.PodMonitor{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading PodMonitors: %w", err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if tm.Kind != "PodMonitor" {
				continue
			}
			pm := &monitoringv1.PodMonitor{}
			if err := yaml.UnmarshalStrict(doc, pm); err != nil {
				return nil, fmt.Errorf("%s: PodMonitor: %w", file, err)
			}
			pMons[pm.Namespace+"/"+pm.Name] = pm
		}
	}
	if len(pMons) == 0 {
		return nil, fmt.Errorf("no PodMonitor in %v", files)
	}
	return pMons, nil
}

// withKubeconfig sets kubeconfig_file in every kubernetes_sd_config.
func withKubeconfig(cfg []byte, kubeconfig string) ([]byte, error) {
	var c map[string]any
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("parsing the generated configuration: %w", err)
	}
	jobs, _ := c["scrape_configs"].([]any)
	for _, j := range jobs {
		job, _ := j.(map[string]any)
		sds, _ := job["kubernetes_sd_configs"].([]any)
		for _, sd := range sds {
			if m, ok := sd.(map[string]any); ok {
				m["kubeconfig_file"] = kubeconfig
			}
		}
	}
	return yaml.Marshal(c)
}
