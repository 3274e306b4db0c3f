package kube

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector"
)

// A ReplicaSet read once keeps its revision when a later read fails (an API
// server outage): a transient failure never rewrites a revision to "".
func TestOwnerCacheKeepsKnownOwnerOnFailure(t *testing.T) {
	rs := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d9f",
			Annotations:     map[string]string{revisionAnnotation: "4"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}},
	}
	client := fake.NewSimpleMetadataClient(ownerScheme(), rs)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := newOwnerCache(client, func() time.Time { return now })
	pod := ownedPod("ReplicaSet", "web-7d9f", map[string]string{templateHashLabel: "7d9f"})

	want := wl("shop", "Deployment", "web", "4")
	if got := c.workload(pod); got != want {
		t.Fatalf("first read: %+v, want %+v", got, want)
	}
	gets := 0
	client.PrependReactor("get", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		gets++
		return true, nil, errors.New("connection refused")
	})
	now = now.Add(ownerTTL + time.Second) // expired: the cache reads again, and fails
	if got := c.workload(pod); got != want {
		t.Fatalf("after a failed re-read: %+v, want %+v", got, want)
	}
	now = now.Add(time.Second) // within ownerErrTTL: no new GET
	c.workload(pod)
	if gets != 1 {
		t.Fatalf("GETs during the outage = %d, want 1 (retries spaced by %s)", gets, ownerErrTTL)
	}
}

// A revision annotation, which the API server does not validate, is
// bounded where it is read: a 256 KiB one becomes its first 253 bytes.
func TestOwnerCacheBoundsRevision(t *testing.T) {
	huge := strings.Repeat("7", 256<<10)
	rs := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d9f",
			Annotations:     map[string]string{revisionAnnotation: huge},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}},
	}
	c := newOwnerCache(fake.NewSimpleMetadataClient(ownerScheme(), rs), time.Now)
	got := c.workload(ownedPod("ReplicaSet", "web-7d9f", nil))
	if want := wl("shop", "Deployment", "web", huge[:collector.MaxValueBytes]); got != want {
		t.Fatalf("revision of %d bytes, want %d", len(got.Revision), len(want.Revision))
	}
}

// An owner never read guesses the Deployment from the template hash and
// leaves the revision unknown.
func TestOwnerCacheUnknownOwner(t *testing.T) {
	client := fake.NewSimpleMetadataClient(ownerScheme())
	c := newOwnerCache(client, time.Now)
	pod := ownedPod("ReplicaSet", "cart-5c6b", map[string]string{templateHashLabel: "5c6b"})
	if got, want := c.workload(pod), wl("shop", "Deployment", "cart", ""); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// ownerScheme lets the fake metadata client hold ReplicaSets.
func ownerScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, &metav1.PartialObjectMetadata{})
	return s
}
