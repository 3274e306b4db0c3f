package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/apiserver/v1alpha1"
)

// How --via reaches the daemons when no --url is given.
const (
	viaAuto = "auto" // the aggregated API when the API server serves it, else the pod proxy
	viaAPI  = "api"  // drainwatch.io/v1alpha1 (drainwatch-apiserver), or fail
	viaPods = "pods" // the API server's pod proxy to each daemon pod
)

// servesAPI reports whether the API server serves drainwatch.io/v1alpha1
// (the chart's apiServer.enabled registered it).
func servesAPI(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	_, err = dc.ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("asking the API server whether it serves %s: %w", v1alpha1.SchemeGroupVersion, err)
}

// apiDaemon is every daemon at once, asked through the aggregated API
// drainwatch.io/v1alpha1 with the kubeconfig's credentials: the API server
// authenticates the user, drainwatch-apiserver checks RBAC in the
// namespace and asks the daemons. The nodes that did not answer come back
// as the API's warnings, printed on stderr (as kubectl prints them).
type apiDaemon struct {
	client rest.Interface
	now    func() time.Time
}

func newAPIDaemon(cfg *rest.Config) (apiDaemon, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	// The answers are decoded here; the core client's codecs decode the
	// API's errors (a Status).
	core, err := corev1.NewForConfig(cfg)
	if err != nil {
		return apiDaemon{}, fmt.Errorf("the client of %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return apiDaemon{client: core.RESTClient(), now: time.Now}, nil
}

func (apiDaemon) Name() string { return v1alpha1.SchemeGroupVersion.String() }

// list GETs resource in the query's namespace (all without one), the
// query's workload, revision and pod as a label selector.
func (d apiDaemon) list(ctx context.Context, resource string, q url.Values, into any) (exporter.Filter, error) {
	f, err := exporter.ParseFilter(q, d.now())
	if err != nil {
		return f, err
	}
	sel := labels.Set{}
	for label, v := range map[string]string{v1alpha1.LabelWorkload: f.Workload, v1alpha1.LabelRevision: f.Revision, v1alpha1.LabelPod: f.Pod} {
		if v != "" {
			sel[label] = v
		}
	}
	path := "/apis/" + v1alpha1.SchemeGroupVersion.String()
	if f.Namespace != "" {
		path += "/namespaces/" + f.Namespace
	}
	req := d.client.Get().AbsPath(path, resource)
	if len(sel) > 0 {
		req = req.Param("labelSelector", labels.SelectorFromSet(sel).String())
	}
	// Result.Error, not Raw's or DoRaw's error: it decodes the API's Status
	// of an error ("forbidden: User … cannot list …"), they keep only the
	// status code.
	res := req.Do(ctx)
	if err := res.Error(); err != nil {
		return f, fmt.Errorf("GET %s/%s: %w", path, resource, err)
	}
	body, err := res.Raw()
	if err != nil {
		return f, fmt.Errorf("GET %s/%s: %w", path, resource, err)
	}
	return f, json.Unmarshal(body, into)
}

// Terminations lists the terminations q selects; since is applied here.
func (d apiDaemon) Terminations(ctx context.Context, q url.Values) (exporter.TerminationList, error) {
	var list v1alpha1.TerminationList
	f, err := d.list(ctx, "terminations", q, &list)
	if err != nil {
		return exporter.TerminationList{}, err
	}
	out := exporter.TerminationList{Terminations: []exporter.TerminationView{}}
	for _, item := range list.Items {
		if f.Match(item.Record.Termination) {
			out.Terminations = append(out.Terminations, item.Record)
		}
	}
	return out, nil
}

// Startups lists the startups q selects.
func (d apiDaemon) Startups(ctx context.Context, q url.Values) (exporter.StartupList, error) {
	var list v1alpha1.StartupList
	f, err := d.list(ctx, "startups", q, &list)
	if err != nil {
		return exporter.StartupList{}, err
	}
	out := exporter.StartupList{Truncated: len(list.Truncated) > 0}
	for _, item := range list.Items {
		if f.MatchStartup(item.Record) {
			out.Startups = append(out.Startups, item.Record)
		}
	}
	return out, nil
}

// apiDaemons is the aggregated API as the one daemon to ask, or nil
// when --via auto finds it is not served.
func (f timelineFlags) apiDaemons() ([]exporter.Daemon, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	if err := checkAPIServerTrust(cfg); err != nil {
		return nil, err
	}
	// No redirect is followed, as on the pod-proxy path: the
	// kubeconfig's credentials would follow it.
	cfg.Wrap(refuseRedirects)
	served, err := servesAPI(cfg)
	if err != nil && f.via == viaAPI {
		return nil, err
	}
	if !served {
		if f.via == viaAPI {
			return nil, errors.New("the API server does not serve " + v1alpha1.SchemeGroupVersion.String() +
				": install drainwatch-apiserver (the chart's apiServer.enabled=true), or ask the daemons with --via pods or --url")
		}
		return nil, nil
	}
	d, err := newAPIDaemon(cfg)
	if err != nil {
		return nil, err
	}
	return []exporter.Daemon{d}, nil
}
