#!/usr/bin/env bash
# Build a test tool from a Go module of its own under testenv/ (Helm in
# testenv/helmbuild, the Prometheus Operator's config generator in
# testenv/opconfig, Prometheus' Kubernetes discovery in testenv/k8ssd,
# govulncheck and golang.org/x/vulndb's indexer in testenv/vulndb, the Argo
# Rollouts controller in testenv/argobuild), once,
# into the cache path given: the project's go.mod does not grow their
# dependencies and `make test` builds them only once.
# Concurrent runs wait for each other (flock) instead of building twice.
#
#   build-gotool.sh <module dir> <package> <output binary> [ldflags]
set -euo pipefail
moddir=$1 pkg=$2 out=$3 ldflags=${4:-}
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9
cd "$moddir"
# Rebuilt when the module's sources change (a stamp of their hash beside it).
stamp=$(cat go.mod go.sum *.go | sha256sum | cut -d' ' -f1)
if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
echo ">> building $(basename "$out") from $pkg (first time only; a few minutes)..."
start=$(date +%s)
go build -trimpath -ldflags="-s $ldflags" -o "$out.tmp" "$pkg"
mv "$out.tmp" "$out"
echo "$stamp" > "$out.stamp"
echo "   $(basename "$out") built in $(( $(date +%s) - start ))s"
