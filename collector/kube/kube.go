package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drainwatch/drainwatch/collector"
)

// protobufContentType is the wire format for built-in types: smaller and
// cheaper to decode than JSON, for both the daemon and the API server.
const protobufContentType = "application/vnd.kubernetes.protobuf"

// DefaultLinger is how long a deleted pod keeps its Event and EndpointSlice
// watches (on top of its grace period): late updates still reach the
// correlator, as the kernel's late events do. It derives from the one
// decision of a deleted pod's end of life, in collector.PodTail.
const DefaultLinger = collector.APILinger

// APISink receives the typed API-side events. Its methods are called from
// several informer goroutines: the sink serializes them (the daemon funnels
// them into the correlator's single loop).
type APISink interface {
	Pod(collector.PodUpdate)
	PodDeleted(collector.PodDeleted)
	Kubelet(collector.KubeletEvent)
	Endpoint(collector.EndpointUpdate)
}

// Config configures the API side of one node's daemon.
type Config struct {
	// NodeName limits the pod watch to this node (spec.nodeName).
	NodeName string
	// Rest is the API client configuration; RestConfig builds one.
	Rest *rest.Config
	Sink APISink
	Log  zerolog.Logger
	// Linger defaults to DefaultLinger.
	Linger time.Duration
	// Now defaults to time.Now; "Seen" times come from it.
	Now func() time.Time
	// AllNodes watches every Node instead of this node's only, to name
	// routing sources on other nodes (see startNodeWatch for the cost).
	AllNodes bool
	// Scope limits the pods observed (PodScope; the zero value: all).
	Scope PodScope
}

// Stats counts watch events received, per resource: the cost the daemon
// puts on the API server and the network, measured by tests.
type Stats struct {
	PodEvents, ServiceEvents, SliceEvents, KubeletEvents uint64
	// NodeEvents counts Node adds, updates and deletes (startNodeWatch).
	NodeEvents uint64
	// SliceWatches counts EndpointSlice watches started: one per service
	// that came to select a local pod, each listing that service's slices.
	SliceWatches uint64
	// PodWatchFailures counts failed lists and watches of the node's pods
	// (what liveness reports when they persist).
	PodWatchFailures uint64
}

type kubeCounters struct {
	pods, services, slices, events, sliceWatches, podFailures, nodes atomic.Uint64
}

// Kube watches, for one node: its pods, the owners of those pods (metadata
// only), the kubelet Events of its terminating pods and the EndpointSlices
// of the services that select its pods.
type Kube struct {
	cfg       Config
	client    *Clients
	owners    *ownerCache
	endpoints *endpointWatch
	events    *eventWatch
	counts    kubeCounters
	pods      *podWatch
	synced    atomic.Bool
	health    watchHealth
}

// RestConfig loads a kubeconfig file, or the in-cluster configuration
// when path is empty, and asks for protobuf for built-in types.
func RestConfig(path string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a pod (%w): pass --kubeconfig or $KUBECONFIG", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	cfg.ContentType = protobufContentType
	cfg.AcceptContentTypes = protobufContentType + ",application/json"
	cfg.UserAgent = "drainwatch"
	return cfg, nil
}

// New builds the API-side collector; Run starts it.
func New(cfg Config) (*Kube, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("node name is empty: pass --node-name or set $NODE_NAME (the downward API's spec.nodeName)")
	}
	if cfg.Rest == nil || cfg.Sink == nil {
		return nil, errors.New("collector.New: Rest and Sink are required")
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client, err := NewClients(cfg.Rest)
	if err != nil {
		return nil, fmt.Errorf("creating API client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg.Rest)
	if err != nil {
		return nil, fmt.Errorf("creating metadata client: %w", err)
	}
	k := &Kube{cfg: cfg, client: client, owners: newOwnerCache(meta, cfg.Now), health: watchHealth{now: cfg.Now}}
	k.owners.updateRevision = func(ctx context.Context, ns, name string) (string, error) {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return statefulSetUpdateRevision(s)
	}
	k.owners.rolloutPodHash = rolloutPodHashReader(client.CoreV1().RESTClient())
	k.endpoints = newEndpointWatch(k)
	k.events = newEventWatch(k)
	k.pods = newPodWatch(k)
	return k, nil
}

// Run watches until ctx is done. It returns an error when the node's pods
// cannot be listed (wrong credentials, no RBAC); later API errors are retried
// by the informers.
func (k *Kube) Run(ctx context.Context) error {
	if err := k.pods.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the first list completed
		}
		return err
	}
	k.synced.Store(true)
	k.startNodeWatch(ctx.Done())
	<-ctx.Done()
	k.endpoints.stopAll()
	k.events.stopAll()
	return nil
}

// Synced reports whether the node's pods have been listed and every one of
// them sent to the sink: a pod the daemon knew before a restart and that
// was not sent by then is gone from the API.
func (k *Kube) Synced() bool { return k.synced.Load() }

// Stats returns the watch events received so far.
func (k *Kube) Stats() Stats {
	return Stats{
		PodEvents: k.counts.pods.Load(), ServiceEvents: k.counts.services.Load(),
		SliceEvents: k.counts.slices.Load(), KubeletEvents: k.counts.events.Load(),
		SliceWatches: k.counts.sliceWatches.Load(), PodWatchFailures: k.counts.podFailures.Load(),
		NodeEvents: k.counts.nodes.Load(),
	}
}
