package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/drainwatch/drainwatch/advise"
)

// workloadAPI reads what -o patch needs from the API server: the
// workloads' pod templates (their containers, preStop hooks and grace
// period) and the server's version (whether it serves the sleep action).
// Argo Rollouts are custom resources: read with the dynamic client.
type workloadAPI struct {
	apps      appsv1.AppsV1Interface
	dynamic   dynamic.Interface
	discovery discovery.ServerVersionInterface
}

// rolloutsGVR is Argo Rollouts' resource.
var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

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
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return workloadAPI{}, fmt.Errorf("creating the dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return workloadAPI{}, fmt.Errorf("creating the discovery client: %w", err)
	}
	return workloadAPI{apps: apps, dynamic: dyn, discovery: disc}, nil
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
		return spec, fmt.Errorf("%s: -o patch supports Deployments, StatefulSets, DaemonSets and Rollouts", ref)
	}
	if err != nil {
		return spec, fmt.Errorf("reading %s: %w", ref, err)
	}
	return spec, nil
}

// patchTarget is what -o patch patches for a workload: the workload itself,
// or, for a Rollout with spec.workloadRef, the Deployment that holds its
// pod template (note says so), with the pod spec read from it.
type patchTarget struct {
	ref  advise.WorkloadRef
	spec corev1.PodSpec
	note string
}

// target reads the object a patch for ref goes to, and its pod template.
func (w workloadAPI) target(ctx context.Context, ref advise.WorkloadRef) (patchTarget, error) {
	if ref.Kind != "Rollout" {
		spec, err := w.podSpec(ctx, ref)
		return patchTarget{ref: ref, spec: spec}, err
	}
	o, err := w.dynamic.Resource(rolloutsGVR).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return patchTarget{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	t, err := advise.ReadRollout(o.Object)
	if err != nil {
		return patchTarget{}, fmt.Errorf("%s: %w", ref, err)
	}
	if t.Deployment == "" {
		return patchTarget{ref: ref, spec: t.Spec}, nil
	}
	dep := advise.WorkloadRef{Namespace: ref.Namespace, Kind: "Deployment", Name: t.Deployment}
	spec, err := w.podSpec(ctx, dep)
	note := fmt.Sprintf("the Rollout takes its pod template from Deployment %s (spec.workloadRef): the patch is for deployment/%s, whose template Argo Rollouts follows", t.Deployment, t.Deployment)
	return patchTarget{ref: dep, spec: spec, note: note}, err
}
