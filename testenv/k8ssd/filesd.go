package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	yamlv2 "gopkg.in/yaml.v2"
	"sigs.k8s.io/yaml"
)

// fileGroup is a file_sd target group.
type fileGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// withFileSD runs Prometheus' own Kubernetes discovery (the code a Prometheus
// built with it runs for kubernetes_sd_configs) once for each
// kubernetes_sd_config of cfg, against the API server of kubeconfig, writes
// the targets it finds, with their __meta_kubernetes_* labels, as file_sd
// target groups under dir, and replaces the kubernetes_sd_configs by
// file_sd_configs of those files. Debian's Prometheus is built without
// Kubernetes discovery; the operator's relabelings then run on the same
// labels as in a cluster.
func withFileSD(ctx context.Context, cfg []byte, kubeconfig, dir string) ([]byte, error) {
	var c map[string]any
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("parsing the generated configuration: %w", err)
	}
	jobs, _ := c["scrape_configs"].([]any)
	for i, j := range jobs {
		job, _ := j.(map[string]any)
		sds, _ := job["kubernetes_sd_configs"].([]any)
		var files []any
		for k, sd := range sds {
			m, _ := sd.(map[string]any)
			m["kubeconfig_file"] = kubeconfig
			groups, err := discover(ctx, m)
			if err != nil {
				return nil, fmt.Errorf("job %v: %w", job["job_name"], err)
			}
			path := filepath.Join(dir, fmt.Sprintf("job%d-sd%d.json", i, k))
			if err := writeGroups(path, groups); err != nil {
				return nil, err
			}
			files = append(files, path)
		}
		if len(sds) > 0 {
			delete(job, "kubernetes_sd_configs")
			job["file_sd_configs"] = []any{map[string]any{"files": files}}
		}
	}
	return yaml.Marshal(c)
}

// discover runs the Kubernetes discoverer of one kubernetes_sd_config until
// it reports a target (or ctx ends).
func discover(ctx context.Context, sd map[string]any) ([]*targetgroup.Group, error) {
	data, err := yaml.Marshal(sd)
	if err != nil {
		return nil, err
	}
	var conf kubernetes.SDConfig
	if err := yamlv2.UnmarshalStrict(data, &conf); err != nil {
		return nil, fmt.Errorf("kubernetes_sd_config: %w", err)
	}
	reg := prometheus.NewRegistry()
	metrics := conf.NewDiscovererMetrics(reg, discovery.NewRefreshMetrics(reg))
	if err := metrics.Register(); err != nil {
		return nil, fmt.Errorf("discovery metrics: %w", err)
	}
	d, err := conf.NewDiscoverer(discovery.DiscovererOptions{Logger: slog.New(slog.DiscardHandler), Metrics: metrics})
	if err != nil {
		return nil, fmt.Errorf("kubernetes discovery: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch := make(chan []*targetgroup.Group)
	go d.Run(ctx, ch)
	bySource := map[string]*targetgroup.Group{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kubernetes discovery found no target within 30s: %w", ctx.Err())
		case groups := <-ch:
			n := 0
			for _, g := range groups {
				bySource[g.Source] = g
			}
			var all []*targetgroup.Group
			for _, g := range bySource {
				n += len(g.Targets)
				all = append(all, g)
			}
			if n > 0 {
				return all, nil
			}
		}
	}
}

// writeGroups writes a group per target: file_sd has no per-target labels.
func writeGroups(path string, groups []*targetgroup.Group) error {
	var out []fileGroup
	for _, g := range groups {
		for _, t := range g.Targets {
			labels := map[string]string{}
			for _, ls := range []model.LabelSet{g.Labels, t} {
				for k, v := range ls {
					labels[string(k)] = string(v)
				}
			}
			addr := labels[model.AddressLabel]
			delete(labels, model.AddressLabel)
			out = append(out, fileGroup{Targets: []string{addr}, Labels: labels})
		}
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
