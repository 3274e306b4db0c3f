package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"testing"
)

// TestTimelineFollowsNoRedirect: a verified https daemon that answers 302 to
// an http:// listener, or to another https one, gets the credential (it is
// the verified peer, exactly one request); the redirect is refused, so the
// listener it points to gets no request at all.
func TestTimelineFollowsNoRedirect(t *testing.T) {
	clear, clearRec := listener(t, false, daemonAPI())
	other, otherRec := listener(t, true, daemonAPI())
	for _, target := range []string{clear.URL, other.URL} {
		s, rec := listener(t, true, redirectTo(target))
		files := writeCredentialFiles(t, s)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--token", "s3cret"}, "Bearer s3cret"},
			{[]string{"--kubeconfig", files.tokenKubeconfig}, "Bearer kube-token"},
			{[]string{"--kubeconfig", files.execKubeconfig}, "Bearer exec-token"},
		} {
			r := runTimeline(append([]string{"--url", s.URL, "--certificate-authority", files.ca}, c.args...)...)
			from := s.URL + "/api/v1/terminations?"
			want := "drainwatch timeline: daemon " + s.URL + ": GET " + from + `: Get "` + from + `": ` + from +
				" redirected to " + target + "/api/v1/terminations?: drainwatch timeline follows no redirect, which would carry " +
				"the credentials there; pass the address that answers itself\n"
			if got := rec.take(); r.code != 1 || r.stderr != want || !slices.Equal(got, []string{c.want}) {
				t.Errorf("%v to %s: exit %d, Authorization headers %q, stderr:\n%s\nwant 1, [%q]:\n%s", c.args, target, r.code, got, r.stderr, c.want, want)
			}
		}
	}
	if got := append(clearRec.take(), otherRec.take()...); len(got) != 0 {
		t.Errorf("the redirects' targets got %d requests (%q), want 0", len(got), got)
	}
}

// TestTimelinePodProxyPathProtectsKubeconfig: without --url, the
// kubeconfig's token goes to the API server only over verified TLS. An
// http:// server gets a request without it (clientcmd leaves it out); one
// whose verification the kubeconfig skips gets no request, the CLI says
// why; a verified one that redirects gets it once, and the http:// listener
// the redirect points to gets nothing.
func TestTimelinePodProxyPathProtectsKubeconfig(t *testing.T) {
	clear, clearRec := listener(t, false, http.NotFoundHandler())
	unverified, unverifiedRec := listener(t, true, http.NotFoundHandler())
	redirecting, redirectingRec := listener(t, true, redirectTo(clear.URL))
	files := writeCredentialFiles(t, redirecting)
	pods := "/api/v1/namespaces/drainwatch/pods?labelSelector=app.kubernetes.io%2Fname%3Ddrainwatch"
	for _, c := range []struct {
		server, cluster, stderr string
		rec                     *authRecorder
		seen                    []string
	}{
		{clear.URL, "", "drainwatch timeline: listing drainwatch pods (namespace drainwatch, selector app.kubernetes.io/name=drainwatch): " +
			"the server could not find the requested resource (get pods)\n", clearRec, []string{""}},
		{unverified.URL, ", insecure-skip-tls-verify: true", "drainwatch timeline: the kubeconfig's cluster " + unverified.URL +
			" skips TLS verification (insecure-skip-tls-verify): its credentials would go to an unverified peer; " +
			"set the cluster's certificate-authority, or ask the daemons with --url\n", unverifiedRec, nil},
		{redirecting.URL, ", certificate-authority: " + files.ca, "drainwatch timeline: listing drainwatch pods (namespace drainwatch, " +
			`selector app.kubernetes.io/name=drainwatch): Get "` + redirecting.URL + pods + `": ` + redirecting.URL + pods + " redirected to " +
			clear.URL + pods + ": drainwatch timeline follows no redirect, which would carry the credentials there; pass the address that answers itself\n",
			redirectingRec, []string{"Bearer kube-token"}},
	} {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		must(t, writeFile(kc, kubeconfigFor(c.server, c.cluster, "{token: kube-token}")))
		r := runTimeline("--kubeconfig", kc)
		if got := c.rec.take(); r.code != 1 || r.stderr != c.stderr || !slices.Equal(got, c.seen) {
			t.Errorf("server %s%s: exit %d, Authorization headers %q, stderr:\n%s\nwant 1, %q:\n%s", c.server, c.cluster, r.code, got, r.stderr, c.seen, c.stderr)
		}
	}
	if got := clearRec.take(); len(got) != 0 {
		t.Errorf("the redirect's http:// target got %d requests (%q), want 0", len(got), got)
	}
}
