package helm_test

import (
	"slices"
	"testing"

	"github.com/drainwatch/drainwatch/daemon"
)

// TestAPIServerRendering: with the recommended values, drainwatch-apiserver
// finds the daemons behind the metrics Service, verifies them with their
// CA and the name their certificate carries, and presents a token of the
// daemons' audience; its serving certificate verifies, with the CA the
// APIService carries, for the name the aggregator dials
// (<service>.<namespace>.svc); its pods are not selected as daemons.
func TestAPIServerRendering(t *testing.T) {
	objs := objects(t, template(t, recommendedValues))
	dep, svc, apisvc, secret := objs["Deployment/drainwatch-apiserver"], objs["Service/drainwatch-api"],
		objs["APIService/v1alpha1.drainwatch.io"], objs["Secret/drainwatch-api-tls"]
	if dep == nil || svc == nil || apisvc == nil || secret == nil {
		t.Fatalf("objects %v: want the Deployment, Service, APIService and TLS Secret of drainwatch-apiserver", keys(objs))
	}
	checkGeneratedTLS(t, secret, "drainwatch-api.drainwatch.svc")
	if got, want := field(t, apisvc, "spec", "caBundle"), secret.Object["data"].(map[string]any)["ca.crt"]; got != want {
		t.Error("the APIService's caBundle is not the CA of the server's certificate")
	}
	if got := field(t, apisvc, "spec", "service"); got.(map[string]any)["name"] != "drainwatch-api" {
		t.Errorf("the APIService's service %v", got)
	}
	pod := field(t, dep, "spec", "template", "spec").(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	args := c["args"].([]any)
	for _, want := range []string{"--daemons-namespace=drainwatch", "--daemons-service=drainwatch-metrics",
		"--daemons-ca-file=/etc/drainwatch/daemons-ca/ca.crt", "--daemons-server-name=drainwatch-metrics.drainwatch.svc",
		"--daemons-token-file=/var/run/secrets/drainwatch/token"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	var audience any
	for _, v := range pod["volumes"].([]any) {
		v := v.(map[string]any)
		if v["name"] == "daemons-token" {
			audience = v["projected"].(map[string]any)["sources"].([]any)[0].(map[string]any)["serviceAccountToken"].(map[string]any)["audience"]
		}
	}
	if audience != daemon.TokenAudience {
		t.Errorf("the daemons' token's audience %v, want %s", audience, daemon.TokenAudience)
	}
	podLabels := field(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
	if podLabels["app.kubernetes.io/name"] == "drainwatch" {
		t.Errorf("pod labels %v: the metrics Service would take the server for a daemon", podLabels)
	}
}
