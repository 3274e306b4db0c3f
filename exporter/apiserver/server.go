// Package apiserver serves the daemons' records as the aggregated API
// drainwatch.io/v1alpha1, the way metrics-server serves metrics.k8s.io:
// the cluster's API server authenticates the user and passes the identity
// on in its front-proxy headers, this server authorizes each request with
// the cluster's RBAC (a SubjectAccessReview on terminations or startups in
// the request's namespace), and asks the daemons, over TLS it verifies,
// with a token of its own bound to the daemons' audience. So
// `kubectl get terminations -n shop` works for a user RBAC allows in shop
// and is refused in any other namespace, and the daemons' ports need not be
// reachable from anywhere but this server.
//
// The records are read-only and held by the daemons: the server stores
// nothing, every list asks the daemons (at most exporter.QueryParallelism
// at once) and names the nodes that did not answer.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/kubernetes"
	clientrest "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/apiserver/v1alpha1"
)

var (
	// Scheme holds the API's types.
	Scheme = runtime.NewScheme()
	// Codecs encode and decode them.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	if err := v1alpha1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
}

// Options configure the server: k8s.io/apiserver's secure serving and
// delegated authentication and authorization (the flags every aggregated
// API server has: --secure-port, --tls-cert-file,
// --requestheader-client-ca-file, --authentication-kubeconfig, …), and how
// the daemons are reached.
type Options struct {
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	Daemons        DaemonsConfig
	// Kubeconfig is the API server's client configuration for the
	// EndpointSlices (and, unless their own flags say otherwise, the
	// token and access reviews); empty: in-cluster.
	Kubeconfig string
}

// DefaultPort is the secure port (metrics-server's default).
const DefaultPort = 10250

// NewOptions are the defaults: port DefaultPort, the daemons behind
// drainwatch/drainwatch-metrics.
func NewOptions() *Options {
	o := &Options{
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		Daemons: DaemonsConfig{Namespace: "drainwatch", Service: "drainwatch-metrics", Port: "metrics",
			Timeout: 20 * time.Second},
	}
	o.SecureServing.BindPort = DefaultPort
	// The health checks are the kubelet's probes; nothing else is public.
	o.Authorization.AlwaysAllowPaths = []string{"/healthz", "/readyz", "/livez"}
	return o
}

// AddFlags adds the options' flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server (empty: in-cluster)")
	fs.StringVar(&o.Daemons.Namespace, "daemons-namespace", o.Daemons.Namespace, "namespace of the daemons' Service")
	fs.StringVar(&o.Daemons.Service, "daemons-service", o.Daemons.Service,
		"the daemons' Service: its EndpointSlices list each node's daemon")
	fs.StringVar(&o.Daemons.Port, "daemons-port", o.Daemons.Port, "name of the Service's port of the daemons' API")
	fs.StringVar(&o.Daemons.CAFile, "daemons-ca-file", o.Daemons.CAFile,
		"CA that issued the daemons' serving certificate (empty: plain HTTP to the daemons)")
	fs.StringVar(&o.Daemons.ServerName, "daemons-server-name", o.Daemons.ServerName,
		"name the daemons' certificate is verified for (default <daemons-service>.<daemons-namespace>.svc)")
	fs.StringVar(&o.Daemons.TokenFile, "daemons-token-file", o.Daemons.TokenFile,
		"token bound to the daemons' audience \"drainwatch\", re-read when it changes (empty: none, for --auth=none daemons)")
	fs.DurationVar(&o.Daemons.Timeout, "daemons-timeout", o.Daemons.Timeout, "bound on one request to one daemon")
	o.SecureServing.AddFlags(fs)
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	if o.Daemons.Namespace == "" || o.Daemons.Service == "" {
		errs = append(errs, errors.New("--daemons-namespace and --daemons-service are required"))
	}
	if o.Daemons.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--daemons-timeout=%s: want a positive duration", o.Daemons.Timeout))
	}
	return errors.Join(errs...)
}

// Server is the configured API server, ready to run.
type Server struct {
	generic *genericapiserver.GenericAPIServer
	daemons *daemonSet
	start   func(<-chan struct{})
}

// New builds the server: loads its certificate (a self-signed one for
// localhost when none is given, as every aggregated API server does for a
// trial), reads the front-proxy CA from kube-system's
// extension-apiserver-authentication ConfigMap, and installs
// drainwatch.io/v1alpha1.
func New(o *Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Daemons.ServerName == "" {
		o.Daemons.ServerName = o.Daemons.Service + "." + o.Daemons.Namespace + ".svc"
	}
	if o.Kubeconfig != "" {
		if o.Authentication.RemoteKubeConfigFile == "" {
			o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
		}
		if o.Authorization.RemoteKubeConfigFile == "" {
			o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
		}
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating a self-signed certificate: %w", err)
	}
	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.EffectiveVersion = utilcompatibility.DefaultBuildEffectiveVersion()
	cfg.EnableProfiling = false
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, err
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	namer := openapinamer.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "drainwatch", exporter.Version
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "drainwatch", exporter.Version

	rc, err := restConfig(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	daemons, informers, err := newDaemonSet(cs, o.Daemons)
	if err != nil {
		return nil, err
	}
	generic, err := cfg.Complete().New("drainwatch-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(v1alpha1.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	info.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"terminations": terminations{daemons: daemons, resource: resource{singular: "termination"}},
		"startups":     startups{daemons: daemons, resource: resource{singular: "startup"}},
	}
	if err := generic.InstallAPIGroup(&info); err != nil {
		return nil, fmt.Errorf("installing %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	// Ready once the daemons' EndpointSlices are listed: before that every
	// list would name no daemon.
	generic.AddPostStartHookOrDie("drainwatch-daemons", func(ctx genericapiserver.PostStartHookContext) error {
		informers.Start(ctx.Done())
		if !daemons.waitSynced(ctx) {
			return errors.New("the daemons' EndpointSlices were never listed")
		}
		return nil
	})
	return &Server{generic: generic, daemons: daemons}, nil
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	return s.generic.PrepareRun().RunWithContext(ctx)
}

func restConfig(kubeconfig string) (*clientrest.Config, error) {
	if kubeconfig == "" {
		rc, err := clientrest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (or give --kubeconfig): %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	return rc, nil
}
