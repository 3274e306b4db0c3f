package main

import (
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
		for _, c := range files.credentials() {
			r := runTimeline(append([]string{"--url", s.URL, "--certificate-authority", files.ca}, c.args...)...)
			from := s.URL + "/api/v1/terminations?limit=500"
			want := "drainwatch timeline: daemon " + s.URL + ": GET " + from + `: Get "` + from + `": ` + from +
				" redirected to " + target + "/api/v1/terminations?limit=500: drainwatch timeline follows no redirect, which would carry " +
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
