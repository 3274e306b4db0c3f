package main

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// urlClient is the HTTP client for a --url daemon. A daemon run with
// --auth=kubernetes wants a bearer token: --token, else the kubeconfig's
// credentials (a token, a token file or an exec plugin) — these only to
// https daemons, never in clear text; --ca-file is the CA of the daemons'
// serving certificate, --insecure-skip-tls-verify for a self-signed one.
func (f timelineFlags) urlClient(base string) (*http.Client, error) {
	cfg := &rest.Config{BearerToken: f.token}
	https := strings.HasPrefix(base, "https://")
	if f.token == "" && https {
		if kc, err := f.restConfig(); err == nil {
			cfg = rest.AnonymousClientConfig(kc)
			cfg.BearerToken, cfg.BearerTokenFile = kc.BearerToken, kc.BearerTokenFile
			cfg.ExecProvider, cfg.AuthProvider = kc.ExecProvider, kc.AuthProvider
		}
	}
	cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: f.caFile, Insecure: f.insecure}
	if !https && cfg.BearerToken == "" {
		return http.DefaultClient, nil
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the client for %s (--token, --ca-file): %w", base, err)
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
