package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/exporter"
)

// urlClient is the HTTP client for a --url daemon. A daemon run with
// --auth=kubernetes wants a bearer token, which only an https daemon whose
// certificate is verified (--certificate-authority, else the system's
// roots) gets: see daemonCredentials. No client follows a redirect.
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
		cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: f.caFile, Insecure: f.insecure, ServerName: f.serverName}
	}
	cfg.WrapTransport = refuseRedirects
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the client for %s (--token, --certificate-authority): %w", base, err)
	}
	return client, nil
}

// podProxyClient is the API client of the pod-proxy path: core/v1 only.
type podProxyClient struct{ core corev1.CoreV1Interface }

// CoreV1 is the client of pods and their proxy.
func (c podProxyClient) CoreV1() corev1.CoreV1Interface { return c.core }

// kubeClient is the kubeconfig's client for the pod-proxy path, refused
// when its credentials would reach the API server unprotected. It follows
// no redirect: a daemon behind the proxy could answer one, and the
// kubeconfig's credentials would follow it.
func (f timelineFlags) kubeClient() (podProxyClient, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return podProxyClient{}, err
	}
	if err := checkAPIServerTrust(cfg); err != nil {
		return podProxyClient{}, err
	}
	cfg.Wrap(refuseRedirects)
	core, err := corev1.NewForConfig(cfg)
	if err != nil {
		return podProxyClient{}, fmt.Errorf("creating the core/v1 client: %w", err)
	}
	return podProxyClient{core: core}, nil
}

// restConfig is the kubeconfig's configuration (--kubeconfig, --context).
func (f timelineFlags) restConfig() (*rest.Config, error) {
	cfg, err := f.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig (or pass --url): %w", err)
	}
	return cfg, nil
}

// clientConfig is the kubeconfig (--kubeconfig, --context), loaded lazily.
func (f timelineFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
}

// proxiedDaemon is a daemon asked through the pod proxy. Its 401 is the
// daemon's own (the API server accepted the user's credentials to list the
// pods): the proxy drops Authorization, so a daemon run with
// --auth=kubernetes cannot be read this way, and the error says how it can.
type proxiedDaemon struct{ exporter.Daemon }

func (d proxiedDaemon) Terminations(ctx context.Context, q url.Values) (exporter.TerminationList, error) {
	list, err := d.Daemon.Terminations(ctx, q)
	return list, d.hint(err)
}

func (d proxiedDaemon) Startups(ctx context.Context, q url.Values) (exporter.StartupList, error) {
	list, err := d.Daemon.Startups(ctx, q)
	return list, d.hint(err)
}

func (proxiedDaemon) hint(err error) error {
	if apierrors.IsUnauthorized(err) {
		err = fmt.Errorf("%w: the API server's pod proxy carries no credentials to the daemon (run with --auth=kubernetes); "+
			"ask it directly: --url https://NODE:9090 --certificate-authority CA.crt", err)
	}
	return err
}

// audienceHint is a --url daemon. Its 401 says which token it takes: a
// daemon run with --auth=kubernetes serves its API only to a token bound to
// the drainwatch audience, which a kubeconfig's token (the API server's
// audience) is not; kubectl create token makes one for a ServiceAccount
// bound to the terminations reader.
type audienceHint struct{ exporter.Daemon }

func (d audienceHint) Terminations(ctx context.Context, q url.Values) (exporter.TerminationList, error) {
	list, err := d.Daemon.Terminations(ctx, q)
	return list, d.hint(err)
}

func (d audienceHint) Startups(ctx context.Context, q url.Values) (exporter.StartupList, error) {
	list, err := d.Daemon.Startups(ctx, q)
	return list, d.hint(err)
}

func (audienceHint) hint(err error) error {
	// exporter.URLDaemon's error quotes the response's status line.
	if err != nil && strings.Contains(err.Error(), ": "+strconv.Itoa(http.StatusUnauthorized)+" "+http.StatusText(http.StatusUnauthorized)) {
		err = fmt.Errorf("%w: the daemon (--auth=kubernetes) takes a token bound to the %s audience, verified with "+
			"--certificate-authority: --token \"$(kubectl create token NAME -n NAMESPACE --audience %s)\" for a ServiceAccount "+
			"bound to the terminations reader ClusterRole", err, daemon.TokenAudience, daemon.TokenAudience)
	}
	return err
}
