package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// TestTimelineTokenAndCA: a daemon serving TLS and wanting a bearer token
// (the check --auth=kubernetes makes, reduced to one token) answers
// `drainwatch timeline --url` with --token or the kubeconfig's token and
// --ca-file (the old name of --certificate-authority); without a token, or
// with --insecure-skip-tls-verify (which sends none), the daemon's 401 is
// the error and the exit code is 1; a CA that did not sign the certificate
// fails the handshake.
func TestTimelineTokenAndCA(t *testing.T) {
	term := correlate.Termination{PodUID: "uid-a", Pod: "web-a", Outcome: "clean", Complete: true,
		Marks: correlate.Marks{StopSignal: time.Now().Add(-time.Minute)}}
	api := exporter.NewServer(exporter.ServerConfig{Source: oneTermination(term), Log: zerolog.Nop()}).Handler()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer s.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	must(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: s3cret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	for _, c := range []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"--token", "s3cret", "--ca-file", ca}, 0, "web-a"},
		{[]string{"--kubeconfig", kubeconfig, "--ca-file", ca}, 0, "web-a"},
		{[]string{"--kubeconfig", kubeconfig, "--insecure-skip-tls-verify"}, 1, "401"},
		{[]string{"--kubeconfig", filepath.Join(dir, "none"), "--ca-file", ca}, 1, "401"},
		{[]string{"--token", "wrong", "--ca-file", ca}, 1, "401"},
		// The 401 says which token the daemon takes.
		{[]string{"--token", "wrong", "--ca-file", ca}, 1, `takes a token bound to the drainwatch audience, verified with --certificate-authority: --token "$(kubectl create token NAME -n NAMESPACE --audience drainwatch)"`},
		{[]string{"--token", "s3cret"}, 1, "certificate"},
	} {
		var out, errOut strings.Builder
		code := timelineCmd(append([]string{"--url", s.URL, "-o", "wide"}, c.args...), &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.contains) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s%s", c.args, code, c.code, c.contains, out.String(), errOut.String())
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
