package main

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// authRecorder records every request's Authorization header ("" for none)
// before handing the request on.
type authRecorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []string
}

func (a *authRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Header.Get("Authorization"))
	a.mu.Unlock()
	a.next.ServeHTTP(w, r)
}

// take returns the headers recorded since the last take.
func (a *authRecorder) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := a.seen
	a.seen = nil
	return seen
}

// listener is a recorded server on 127.0.0.1 (httptest's address): plain
// HTTP, or TLS with httptest's self-signed certificate.
func listener(t *testing.T, tls bool, h http.Handler) (*httptest.Server, *authRecorder) {
	t.Helper()
	rec := &authRecorder{next: h}
	s := httptest.NewUnstartedServer(rec)
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, rec
}

// daemonAPI is a daemon's API holding one termination, of pod web-a.
func daemonAPI() http.Handler {
	term := correlate.Termination{PodUID: "uid-a", Pod: "web-a", Outcome: "clean", Complete: true,
		Marks: correlate.Marks{StopSignal: time.Now().Add(-time.Minute)}}
	return exporter.NewServer(exporter.ServerConfig{Source: oneTermination(term), Log: zerolog.Nop()}).Handler()
}

// redirectTo answers every request with a 302 to the same path on target.
func redirectTo(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusFound)
	})
}

// credentialFiles are a test's kubeconfigs and the CA of httptest's
// certificate: a user with a token, a user with an exec plugin that counts
// its runs in execRuns.
type credentialFiles struct {
	ca, tokenKubeconfig, execKubeconfig, execRuns string
}

// credential is one way to give timeline a credential, and the
// Authorization header it makes.
type credential struct {
	args []string
	want string
}

// credentials are --token, the kubeconfig's token and its exec plugin's.
func (c credentialFiles) credentials() []credential {
	return []credential{
		{[]string{"--token", "s3cret"}, "Bearer s3cret"},
		{[]string{"--kubeconfig", c.tokenKubeconfig}, "Bearer kube-token"},
		{[]string{"--kubeconfig", c.execKubeconfig}, "Bearer exec-token"},
	}
}

func writeCredentialFiles(t *testing.T, tlsServer *httptest.Server) credentialFiles {
	t.Helper()
	dir := t.TempDir()
	c := credentialFiles{ca: filepath.Join(dir, "ca.crt"), tokenKubeconfig: filepath.Join(dir, "token.kubeconfig"),
		execKubeconfig: filepath.Join(dir, "exec.kubeconfig"), execRuns: filepath.Join(dir, "exec-runs")}
	must(t, os.WriteFile(c.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsServer.Certificate().Raw}), 0o600))
	plugin := filepath.Join(dir, "plugin.sh")
	must(t, os.WriteFile(plugin, []byte("#!/bin/sh\necho run >>"+c.execRuns+"\n"+
		`echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token"}}'`+"\n"), 0o700))
	must(t, os.WriteFile(c.tokenKubeconfig, []byte(kubeconfigFor("https://127.0.0.1:1", "", "{token: kube-token}")), 0o600))
	must(t, os.WriteFile(c.execKubeconfig, []byte(kubeconfigFor("https://127.0.0.1:1", "",
		fmt.Sprintf("{exec: {apiVersion: client.authentication.k8s.io/v1, command: %s, interactiveMode: Never}}", plugin))), 0o600))
	return c
}

// kubeconfigFor is a kubeconfig of one cluster at server (cluster holds its
// other fields) and one user.
func kubeconfigFor(server, cluster, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q%s}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, cluster, user)
}

// execRunCount is how many times the exec plugin ran.
func (c credentialFiles) execRunCount(t *testing.T) int {
	data, err := os.ReadFile(c.execRuns)
	if os.IsNotExist(err) {
		return 0
	}
	must(t, err)
	return strings.Count(string(data), "run\n")
}

// timelineRun is one `drainwatch timeline` run's result.
type timelineRun struct {
	code        int
	out, stderr string
}

func runTimeline(args ...string) timelineRun {
	var out, errOut strings.Builder
	code := timelineCmd(append([]string{"-o", "wide"}, args...), &out, &errOut)
	return timelineRun{code, out.String(), errOut.String()}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
