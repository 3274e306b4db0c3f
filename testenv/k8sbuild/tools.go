//go:build tools

// Package k8sbuild pins the real Kubernetes control plane, kube-proxy and etcd that testenv runs.
// It is a separate module so the product's go.mod never depends on k8s.io/kubernetes.
package k8sbuild

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
