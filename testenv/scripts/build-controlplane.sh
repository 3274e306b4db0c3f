#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
# from the k8s.io/kubernetes Go module pinned in testenv/k8sbuild, once per version.
set -euo pipefail
version=$1 out=$2
cd "$(dirname "$0")/../k8sbuild"
mkdir -p "$out"
declare -A pkgs=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  if [ -x "$out/$name" ]; then continue; fi
  echo ">> building $name $version (first time only; a few minutes)..."
  start=$(date +%s)
  go build -trimpath -ldflags=-s -o "$out/$name.tmp" "${pkgs[$name]}"
  mv "$out/$name.tmp" "$out/$name"
  echo "   $name built in $(( $(date +%s) - start ))s"
done
