package kube

import (
	"fmt"

	"k8s.io/client-go/rest"

	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	authnv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	batchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
)

// Clients are the typed clients of the API groups drainwatch uses, and of
// no other: client-go's Clientset holds the typed clients of every group,
// and since k8s.io/apiserver (linked for --auth kubernetes) makes the
// linker keep every exported method of a type used as an interface, a
// Clientset anywhere in the binary costs ~3.7 MiB of code and ~3 MiB of
// its tables that every daemon maps. They share one HTTP client, as a
// Clientset's do. Tests may pass a Clientset where these are accepted.
type Clients struct {
	core  *corev1.CoreV1Client
	apps  *appsv1.AppsV1Client
	batch *batchv1.BatchV1Client
	disc  *discoveryv1.DiscoveryV1Client
	authn *authnv1.AuthenticationV1Client
	authz *authzv1.AuthorizationV1Client
}

// NewClients builds the typed clients of core/v1, apps/v1, batch/v1,
// discovery/v1, authentication/v1 and authorization/v1 for rc.
func NewClients(rc *rest.Config) (*Clients, error) {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the API client's transport: %w", err)
	}
	c := &Clients{}
	if c.core, err = corev1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, fmt.Errorf("creating the core/v1 client: %w", err)
	}
	if c.apps, err = appsv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, fmt.Errorf("creating the apps/v1 client: %w", err)
	}
	if c.batch, err = batchv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, fmt.Errorf("creating the batch/v1 client: %w", err)
	}
	if c.disc, err = discoveryv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, fmt.Errorf("creating the discovery/v1 client: %w", err)
	}
	if c.authn, err = authnv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, fmt.Errorf("creating the authentication/v1 client: %w", err)
	}
	if c.authz, err = authzv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, fmt.Errorf("creating the authorization/v1 client: %w", err)
	}
	return c, nil
}

// CoreV1 is the core/v1 client: pods, services, Events, the pod proxy.
func (c *Clients) CoreV1() corev1.CoreV1Interface { return c.core }

// AppsV1 is the apps/v1 client: the workloads Events are about.
func (c *Clients) AppsV1() appsv1.AppsV1Interface { return c.apps }

// BatchV1 is the batch/v1 client: Jobs, which Events may be about.
func (c *Clients) BatchV1() batchv1.BatchV1Interface { return c.batch }

// DiscoveryV1 is the discovery/v1 client: EndpointSlices.
func (c *Clients) DiscoveryV1() discoveryv1.DiscoveryV1Interface { return c.disc }

// AuthenticationV1 is the authentication/v1 client: TokenReviews.
func (c *Clients) AuthenticationV1() authnv1.AuthenticationV1Interface { return c.authn }

// AuthorizationV1 is the authorization/v1 client: (Self)SubjectAccessReviews.
func (c *Clients) AuthorizationV1() authzv1.AuthorizationV1Interface { return c.authz }
