package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/drainwatch/drainwatch/collector"
)

// TestRolloutCurrentRevision: an Argo Rollout's current revision is its
// status.currentPodHash, read in JSON (a custom resource has no protobuf)
// with the protobuf content type the daemon's clients use; a pod whose
// template hash differs from it is behind, so its deletion is a rollout.
func TestRolloutCurrentRevision(t *testing.T) {
	var path, accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, accept = r.URL.Path, r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"canary",` +
			`"annotations":{"rollout.argoproj.io/revision":"2"}},"status":{"currentPodHash":"8f9e","stableRS":"6c7d"}}`))
	}))
	defer srv.Close()
	core, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: protobufContentType}})
	if err != nil {
		t.Fatal(err)
	}
	c := newOwnerCache(nil, time.Now)
	c.rolloutPodHash = rolloutPodHashReader(core.RESTClient())
	w := collector.Workload{Namespace: "shop", Kind: "Rollout", Name: "canary", Revision: "6c7d"}
	if got := c.currentRevision(w); got != "8f9e" {
		t.Errorf("current revision %q, want the status's currentPodHash 8f9e", got)
	}
	if path != "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/canary" || !strings.HasPrefix(accept, "application/json") {
		t.Errorf("GET %s (Accept %q), want the Rollout in JSON", path, accept)
	}
}

// TestRolloutCurrentRevisionUnreadable: no reader, or a failed read, is an
// unknown current revision, never the pod's own.
func TestRolloutCurrentRevisionUnreadable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"kind":"Status","code":403}`, http.StatusForbidden)
	}))
	defer srv.Close()
	core, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w := collector.Workload{Namespace: "shop", Kind: "Rollout", Name: "canary", Revision: "6c7d"}
	if got := newOwnerCache(nil, time.Now).currentRevision(w); got != "" {
		t.Errorf("no reader: %q, want unknown", got)
	}
	c := newOwnerCache(nil, time.Now)
	c.rolloutPodHash = rolloutPodHashReader(core.RESTClient())
	if got, err := c.rolloutPodHash(context.Background(), "shop", "canary"); got != "" || err == nil {
		t.Errorf("forbidden: %q, %v; want an error", got, err)
	}
	if got := c.currentRevision(w); got != "" {
		t.Errorf("forbidden: current revision %q, want unknown", got)
	}
}
