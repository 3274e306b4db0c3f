#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
# kube-proxy (one per testenv node: testenv/kubeproxy), or the names given after
# the output dir (e.g. kubelet for `make realnode`)
# from the k8s.io/kubernetes Go module pinned in testenv/k8sbuild (or, for another
# release, testenv/k8sbuild/releases/<version>), once per version.
# Concurrent runs wait for each other (flock) instead of building twice.
set -euo pipefail
version=$1 out=$(realpath -m "$2")
shift 2
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kube-proxy)
# The pinned release builds from testenv/k8sbuild; the others make
# k8s-versions tests from testenv/k8sbuild/releases/<version>
# (testenv/scripts/k8sbuild-release.sh writes one).
cd "$(dirname "$0")/../k8sbuild"
if [ "$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' go.mod)" != "$version" ]; then
  [ -d "releases/$version" ] || { echo "no module for Kubernetes $version: run bash testenv/scripts/k8sbuild-release.sh $version" >&2; exit 1; }
  cd "releases/$version"
fi
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
declare -A pkgs=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
)
# Stamp the release into the binaries as Kubernetes' own build does, so
# /version and `kubectl version` say v1.37.2 instead of v0.0.0-master.
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
for name in "${names[@]}"; do
  if [ -x "$out/$name" ]; then continue; fi
  echo ">> building $name $version (first time only; a few minutes)..."
  start=$(date +%s)
  go build -trimpath -ldflags="-s$stamp" -o "$out/$name.tmp" "${pkgs[$name]}"
  mv "$out/$name.tmp" "$out/$name"
  echo "   $name built in $(( $(date +%s) - start ))s"
done
