package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/drainwatch/drainwatch/exporter"
)

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
		r := runTimeline("--kubeconfig", kc, "--via", "pods")
		if got := c.rec.take(); r.code != 1 || r.stderr != c.stderr || !slices.Equal(got, c.seen) {
			t.Errorf("server %s%s: exit %d, Authorization headers %q, stderr:\n%s\nwant 1, %q:\n%s", c.server, c.cluster, r.code, got, r.stderr, c.seen, c.stderr)
		}
	}
	// The aggregated API's path: its discovery request refuses the
	// redirect too.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, writeFile(kc, kubeconfigFor(redirecting.URL, ", certificate-authority: "+files.ca, "{token: kube-token}")))
	r := runTimeline("--kubeconfig", kc, "--via", "api")
	if got := redirectingRec.take(); r.code != 1 || !strings.Contains(r.stderr, "follows no redirect") || !slices.Equal(got, []string{"Bearer kube-token"}) {
		t.Errorf("--via api, a redirecting server: exit %d, Authorization headers %q, stderr:\n%s\nwant 1, one token, no redirect followed", r.code, got, r.stderr)
	}
	if got := clearRec.take(); len(got) != 0 {
		t.Errorf("the redirect's http:// target got %d requests (%q), want 0", len(got), got)
	}
}

// failingDaemon answers every query with err.
type failingDaemon struct{ err error }

func (d failingDaemon) Name() string { return "drainwatch/dw-a" }

func (d failingDaemon) Terminations(context.Context, url.Values) (exporter.TerminationList, error) {
	return exporter.TerminationList{}, d.err
}

func (d failingDaemon) Startups(context.Context, url.Values) (exporter.StartupList, error) {
	return exporter.StartupList{}, d.err
}

// TestTimelinePodProxy401SaysWhy: a daemon's 401 through the pod proxy (as
// client-go reports a proxied 401), to its terminations or its startups,
// names the way that carries credentials; any other error is left as it is.
func TestTimelinePodProxy401SaysWhy(t *testing.T) {
	unauthorized := fmt.Errorf("pod proxy to drainwatch/dw-a:9090: %w",
		apierrors.NewGenericServerResponse(http.StatusUnauthorized, "get", schema.GroupResource{Resource: "pods"}, "dw-a", "Unauthorized", 0, false))
	for _, c := range []struct {
		err  error
		want string
	}{
		{unauthorized, unauthorized.Error() + ": the API server's pod proxy carries no credentials to the daemon (run with " +
			"--auth=kubernetes); ask it directly: --url https://NODE:9090 --certificate-authority CA.crt"},
		{errors.New("connection refused"), "connection refused"},
	} {
		d := proxiedDaemon{failingDaemon{c.err}}
		_, err := d.Terminations(context.Background(), nil)
		_, startupsErr := d.Startups(context.Background(), nil)
		if err == nil || err.Error() != c.want || startupsErr == nil || startupsErr.Error() != c.want {
			t.Errorf("errors %v and (startups) %v, want %s", err, startupsErr, c.want)
		}
	}
}
