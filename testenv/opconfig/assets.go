package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus-operator/prometheus-operator/pkg/assets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// operatorCertsDir is where the operator mounts the TLS assets (CA
// certificates, client keys) its configuration names in ca_file.
const operatorCertsDir = "/etc/prometheus/certs"

// newStore is the operator's asset store: with a kubeconfig it reads the
// Secrets and ConfigMaps the PodMonitors reference from that API server, as
// the operator does; without one it holds nothing.
func newStore(kubeconfig string) (*assets.StoreBuilder, error) {
	if kubeconfig == "" {
		return assets.NewStoreBuilder(nil, nil), nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	return assets.NewStoreBuilder(cs.CoreV1(), cs.CoreV1()), nil
}

// loadAssets does what the operator's resource selector does before it
// generates the configuration: every endpoint's TLS references and
// authorization credentials are read into the store (the generator then
// inlines the credentials and names the TLS files).
func loadAssets(ctx context.Context, store *assets.StoreBuilder, pMons map[string]*monitoringv1.PodMonitor) error {
	for key, pm := range pMons {
		for i, ep := range pm.Spec.PodMetricsEndpoints {
			if err := store.AddSafeTLSConfig(ctx, pm.Namespace, ep.TLSConfig); err != nil {
				return fmt.Errorf("PodMonitor %s endpoint %d: %w", key, i, err)
			}
			if err := store.AddSafeAuthorizationCredentials(ctx, pm.Namespace, ep.Authorization); err != nil {
				return fmt.Errorf("PodMonitor %s endpoint %d: %w", key, i, err)
			}
		}
	}
	return nil
}

// writeAssets writes the store's TLS assets into dir, the operator's
// Secret mounted at operatorCertsDir, and points the configuration there.
func writeAssets(cfg []byte, store *assets.StoreBuilder, dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	for name, data := range store.TLSAssets() {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("writing the TLS asset %s: %w", name, err)
		}
	}
	return bytes.ReplaceAll(cfg, []byte(operatorCertsDir+"/"), []byte(filepath.Clean(dir)+"/")), nil
}
