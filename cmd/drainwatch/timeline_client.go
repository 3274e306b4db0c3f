package main

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// urlClient is the HTTP client for a --url daemon. A daemon run with
// --auth=kubernetes wants a bearer token, which only an https daemon whose
// certificate is verified (--certificate-authority, else the system's
// roots) gets: see daemonCredentials.
func (f timelineFlags) urlClient(base string) (*http.Client, error) {
	u, err := daemonURL(base)
	if err != nil {
		return nil, err
	}
	if err := f.checkDaemonTrust(u); err != nil {
		return nil, err
	}
	cfg := &rest.Config{}
	if u.Scheme == "https" {
		cfg = f.daemonCredentials()
		cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: f.caFile, Insecure: f.insecure}
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the client for %s (--token, --certificate-authority): %w", base, err)
	}
	return client, nil
}

// restConfig is the kubeconfig's configuration (--kubeconfig, --context).
func (f timelineFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig (or pass --url): %w", err)
	}
	return cfg, nil
}
