package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/drainwatch/drainwatch/advise"
)

// workloadAPI reads what -o patch needs from the API server: the
// workloads' pod templates (their containers, preStop hooks and grace
// period) and the server's version (whether it serves the sleep action).
type workloadAPI struct {
	apps      appsv1.AppsV1Interface
	discovery discovery.ServerVersionInterface
}

// workloadAPI is the kubeconfig's client, refused like the pod-proxy path
// when its credentials would reach the API server unprotected.
func (f adviseFlags) workloadAPI() (workloadAPI, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return workloadAPI{}, fmt.Errorf("-o patch reads the workloads from the API server: %w", err)
	}
	if err := checkAPIServerTrust(cfg); err != nil {
		return workloadAPI{}, err
	}
	cfg.Wrap(refuseRedirects)
	apps, err := appsv1.NewForConfig(cfg)
	if err != nil {
		return workloadAPI{}, fmt.Errorf("creating the apps/v1 client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return workloadAPI{}, fmt.Errorf("creating the discovery client: %w", err)
	}
	return workloadAPI{apps: apps, discovery: disc}, nil
}

// nativeSleep says whether the API server serves the preStop sleep action
// (Kubernetes >= 1.34, where it is GA and on by default).
func (w workloadAPI) nativeSleep() (bool, error) {
	v, err := w.discovery.ServerVersion()
	if err != nil {
		return false, fmt.Errorf("reading the API server's version: %w", err)
	}
	major, _ := strconv.Atoi(v.Major)
	minor, _ := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	return major > 1 || (major == 1 && minor >= advise.NativeSleepMinor), nil
}

// podSpec is the pod template of a Deployment, StatefulSet or DaemonSet.
func (w workloadAPI) podSpec(ctx context.Context, ref advise.WorkloadRef) (corev1.PodSpec, error) {
	apps, opts := w.apps, metav1.GetOptions{}
	var spec corev1.PodSpec
	var err error
	switch ref.Kind {
	case "Deployment":
		o, e := apps.Deployments(ref.Namespace).Get(ctx, ref.Name, opts)
		if err = e; err == nil {
			spec = o.Spec.Template.Spec
		}
	case "StatefulSet":
		o, e := apps.StatefulSets(ref.Namespace).Get(ctx, ref.Name, opts)
		if err = e; err == nil {
			spec = o.Spec.Template.Spec
		}
	case "DaemonSet":
		o, e := apps.DaemonSets(ref.Namespace).Get(ctx, ref.Name, opts)
		if err = e; err == nil {
			spec = o.Spec.Template.Spec
		}
	default:
		return spec, fmt.Errorf("%s: -o patch supports Deployments, StatefulSets and DaemonSets", ref)
	}
	if err != nil {
		return spec, fmt.Errorf("reading %s: %w", ref, err)
	}
	return spec, nil
}
