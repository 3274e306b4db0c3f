package main

import (
	"errors"
	"fmt"
	"net/url"

	"k8s.io/client-go/rest"
)

// Where `drainwatch timeline` may send a credential — --token, the
// kubeconfig's token or token file, an exec or auth plugin's token — is
// decided here, once: only over TLS, only to a peer whose certificate was
// verified. The daemon accepts any
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
