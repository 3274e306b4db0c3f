package main

import (
	"slices"
	"strings"
	"testing"
)

// TestTimelineSendsNoTokenOverHTTP: to an http:// daemon, --token is
// refused before any connection, with the fix; the kubeconfig's token and
// exec plugin are left out (the plugin does not even run), so the daemon
// sees exactly one request a list (terminations, startups), without
// Authorization.
func TestTimelineSendsNoTokenOverHTTP(t *testing.T) {
	tlsRef, _ := listener(t, true, daemonAPI())
	files := writeCredentialFiles(t, tlsRef)
	s, rec := listener(t, false, daemonAPI())
	host := strings.TrimPrefix(s.URL, "http://")
	r := runTimeline("--url", s.URL, "--token", "s3cret")
	want := "drainwatch timeline: --token would cross " + s.URL + " in clear text: serve the daemon with TLS and pass --url https://" + host +
		" (with --certificate-authority), or leave --token out for a daemon run with --auth=none\n"
	if r.code != 2 || r.stderr != want || r.out != "" {
		t.Errorf("--token over http: exit %d, stderr %q; want 2, %q", r.code, r.stderr, want)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("--token over http: the listener got %d requests (%q), want 0", len(got), got)
	}
	for _, kc := range []string{files.tokenKubeconfig, files.execKubeconfig} {
		r := runTimeline("--url", s.URL, "--kubeconfig", kc)
		if got := rec.take(); r.code != 0 || !strings.Contains(r.out, "web-a") || !slices.Equal(got, []string{"", ""}) {
			t.Errorf("%s over http: exit %d, Authorization headers %q; want 0, two requests without:\n%s%s", kc, r.code, got, r.out, r.stderr)
		}
	}
	if n := files.execRunCount(t); n != 0 {
		t.Errorf("the exec plugin ran %d times for an http daemon, want 0", n)
	}
}

// TestTimelineSendsNoCredentialUnverified: with --insecure-skip-tls-verify
// the kubeconfig's token and exec plugin are not used (one request a list,
// without Authorization); --token is refused, and so is the CA flag beside
// it.
func TestTimelineSendsNoCredentialUnverified(t *testing.T) {
	s, rec := listener(t, true, daemonAPI())
	files := writeCredentialFiles(t, s)
	host := strings.TrimPrefix(s.URL, "https://")
	for _, kc := range []string{files.tokenKubeconfig, files.execKubeconfig} {
		r := runTimeline("--url", s.URL, "--kubeconfig", kc, "--insecure-skip-tls-verify")
		if got := rec.take(); r.code != 0 || !strings.Contains(r.out, "web-a") || !slices.Equal(got, []string{"", ""}) {
			t.Errorf("%s, unverified: exit %d, Authorization headers %q; want 0, two requests without:\n%s%s", kc, r.code, got, r.out, r.stderr)
		}
	}
	if n := files.execRunCount(t); n != 0 {
		t.Errorf("the exec plugin ran %d times for an unverified daemon, want 0", n)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "s3cret", "--insecure-skip-tls-verify"}, "drainwatch timeline: --token with --insecure-skip-tls-verify would hand the token to whoever answers at " +
			host + ": verify the daemon with --certificate-authority CA.crt instead (the CA that signed its serving certificate)\n"},
		{[]string{"--token", "s3cret", "--insecure-skip-tls-verify", "--certificate-authority", files.ca}, "drainwatch timeline: " +
			"--insecure-skip-tls-verify and --certificate-authority contradict each other: keep --certificate-authority, which verifies the daemons\n"},
	} {
		r := runTimeline(append([]string{"--url", s.URL}, c.args...)...)
		if got := rec.take(); r.code != 2 || r.stderr != c.want || len(got) != 0 {
			t.Errorf("%v: exit %d, %d requests, stderr %q; want 2, 0, %q", c.args, r.code, len(got), r.stderr, c.want)
		}
	}
}

// TestTimelineTokenReachesVerifiedDaemon is the positive control: with the
// CA of the daemon's certificate, each credential arrives with each list,
// terminations then startups: exactly twice.
func TestTimelineTokenReachesVerifiedDaemon(t *testing.T) {
	s, rec := listener(t, true, daemonAPI())
	files := writeCredentialFiles(t, s)
	for _, c := range files.credentials() {
		r := runTimeline(append([]string{"--url", s.URL, "--certificate-authority", files.ca}, c.args...)...)
		if got := rec.take(); r.code != 0 || !strings.Contains(r.out, "web-a") || !slices.Equal(got, []string{c.want, c.want}) {
			t.Errorf("%v: exit %d, Authorization headers %q; want 0, [%q %[4]q]:\n%s%s", c.args, r.code, got, c.want, r.out, r.stderr)
		}
	}
	if n := files.execRunCount(t); n != 1 {
		t.Errorf("the exec plugin ran %d times, want 1", n)
	}
}
