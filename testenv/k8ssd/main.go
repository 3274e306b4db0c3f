// Command k8ssd runs Prometheus' own Kubernetes service discovery (package
// github.com/prometheus/prometheus/discovery/kubernetes, pinned in this
// module's go.mod) for every kubernetes_sd_config of a Prometheus
// configuration, writes the targets it finds with their __meta_kubernetes_*
// labels as file_sd target groups, and prints the configuration with
// file_sd_configs in their place. Debian's Prometheus is built without
// Kubernetes discovery; with this, it scrapes what a Prometheus in the
// cluster would, relabeled by the same rules. A module of its own: the
// Prometheus Operator's module (testenv/opconfig) needs a newer client-go
// than this Prometheus discovery compiles with.
//
//	k8ssd -kubeconfig KUBECONFIG -dir DIR < prometheus.yml > prometheus-filesd.yml
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to discover targets in")
	dir := flag.String("dir", "", "directory for the file_sd target groups")
	flag.Parse()
	if *kubeconfig == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "k8ssd: -kubeconfig and -dir are required")
		os.Exit(2)
	}
	cfg, err := io.ReadAll(os.Stdin)
	if err == nil {
		cfg, err = withFileSD(context.Background(), cfg, *kubeconfig, *dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8ssd:", err)
		os.Exit(1)
	}
	os.Stdout.Write(cfg)
}
