#!/usr/bin/env bash
# make release-version VERSION=vX.Y.Z: the image tag a release installs by
# default, in the two places users install from: the chart's appVersion
# (and its version, X.Y.Z) and the kustomize base's images newTag. `make
# image VERSION=vX.Y.Z` builds the image with that tag. Never "latest": a
# default that moves would install another version on each node restart.
#   set-version.sh VERSION [REPO_ROOT]
set -euo pipefail
version=$1 root=${2:-.}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { echo "release-version: VERSION=$version is not vX.Y.Z[-pre]" >&2; exit 1; }
chart=$root/deploy/helm/drainwatch/Chart.yaml
base=$root/deploy/daemonset/base/kustomization.yaml
sed -i -E "s/^version: .*/version: ${version#v}/; s/^appVersion: .*/appVersion: \"$version\"/" "$chart"
sed -i -E "s/^(    newTag: ).*/\1$version/" "$base"
grep -q "^appVersion: \"$version\"$" "$chart" && grep -q "^    newTag: $version$" "$base" ||
  { echo "release-version: $chart or $base not updated" >&2; exit 1; }
echo "chart $chart and base $base: image tag $version"
