package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"k8s.io/client-go/rest"
)

// Where `drainwatch timeline` may send a credential — --token, the
// kubeconfig's token or token file, an exec or auth plugin's token — is
// decided here, once: only over TLS, only to a peer whose certificate was
// verified, and never on to where a redirect points. The daemon accepts any
// token the API server accepts, so a token that leaks to whoever answers an
// address also works against the cluster.

// daemonURL parses a --url: http or https, with a host.
func daemonURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want https://NODE:9090 (or http:// for a daemon without TLS)", raw)
	}
	return u, nil
}

// checkDaemonTrust refuses the flags that would send --token where it
// cannot be protected. A token the user typed is refused rather than left
// out, so that the error says why instead of a daemon's 401; the
// kubeconfig's credentials are simply not sent (daemonCredentials).
func (f timelineFlags) checkDaemonTrust(u *url.URL) error {
	switch {
	case f.insecure && f.caFile != "":
		return errors.New("--insecure-skip-tls-verify and --certificate-authority contradict each other: keep --certificate-authority, which verifies the daemons")
	case u.Scheme == "http" && f.token != "":
		return fmt.Errorf("--token would cross %s in clear text: serve the daemon with TLS and pass --url https://%s "+
			"(with --certificate-authority), or leave --token out for a daemon run with --auth=none", u.Redacted(), u.Host)
	case f.insecure && f.token != "":
		return fmt.Errorf("--token with --insecure-skip-tls-verify would hand the token to whoever answers at %s: "+
			"verify the daemon with --certificate-authority CA.crt instead (the CA that signed its serving certificate)", u.Host)
	}
	return nil
}

// daemonCredentials are the credentials an https daemon gets: --token, else
// the kubeconfig's token, token file or plugin, else none (no kubeconfig: an
// anonymous request, which a daemon run with --auth=none answers). With
// --insecure-skip-tls-verify the peer is unverified, so it gets none.
func (f timelineFlags) daemonCredentials() *rest.Config {
	if f.token != "" {
		return &rest.Config{BearerToken: f.token}
	}
	if f.insecure {
		return &rest.Config{}
	}
	kc, err := f.restConfig()
	if err != nil {
		return &rest.Config{}
	}
	return &rest.Config{BearerToken: kc.BearerToken, BearerTokenFile: kc.BearerTokenFile,
		ExecProvider: kc.ExecProvider, AuthProvider: kc.AuthProvider}
}

// refuseRedirects wraps the transport of every client of the CLI. That
// transport adds the credentials to each request it sends, a redirected one
// too: following a redirect would carry them to whatever address the answer
// names (an http:// one in clear text). The daemon's API and the API
// server's pod proxy never redirect, so a redirect is refused, with where it
// pointed. It is refused here rather than by the http.Client's
// CheckRedirect because client-go, given the redirect's response beside
// that error, logs a misleading "unexpected error when reading response
// body" line.
func refuseRedirects(next http.RoundTripper) http.RoundTripper {
	return redirectRefuser{next: next}
}

type redirectRefuser struct{ next http.RoundTripper }

func (r redirectRefuser) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || !followable(resp) {
		return resp, err
	}
	resp.Body.Close()
	to := resp.Header.Get("Location")
	if u, err := req.URL.Parse(to); err == nil {
		to = u.Redacted()
	}
	return nil, fmt.Errorf("%s redirected to %s: drainwatch timeline follows no redirect, which would carry "+
		"the credentials there; pass the address that answers itself", req.URL.Redacted(), to)
}

// followable is a response the http.Client would follow.
func followable(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// checkAPIServerTrust refuses a kubeconfig whose credentials would reach
// the API server unverified (the pod-proxy path, without --url). Over
// http:// they cannot: clientcmd loads the user's credentials only for a
// server it reaches over TLS. Client certificates are no such credential: a TLS client
// certificate proves the key without revealing it, so a peer cannot replay it.
func checkAPIServerTrust(cfg *rest.Config) error {
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil &&
		cfg.AuthProvider == nil && cfg.Password == "" {
		return nil
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return fmt.Errorf("the kubeconfig's server %q: %w", cfg.Host, err)
	}
	if cfg.Insecure {
		return fmt.Errorf("the kubeconfig's cluster %s skips TLS verification (insecure-skip-tls-verify): its credentials "+
			"would go to an unverified peer; set the cluster's certificate-authority, or ask the daemons with --url", u.Redacted())
	}
	return nil
}
