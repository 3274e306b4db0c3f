#!/usr/bin/env bash
# Build a test tool from a Go module of its own under testenv/ (Helm in
# testenv/helmbuild, the Prometheus Operator's config generator in
# testenv/opconfig), once, into the cache path given: the project's go.mod
# does not grow their dependencies and `make test` builds them only once.
# Concurrent runs wait for each other (flock) instead of building twice.
#
#   build-gotool.sh <module dir> <package> <output binary> [ldflags]
set -euo pipefail
moddir=$1 pkg=$2 out=$3 ldflags=${4:-}
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9
if [ -x "$out" ]; then exit 0; fi
cd "$moddir"
echo ">> building $(basename "$out") from $pkg (first time only; a few minutes)..."
start=$(date +%s)
go build -trimpath -ldflags="-s $ldflags" -o "$out.tmp" "$pkg"
mv "$out.tmp" "$out"
echo "   $(basename "$out") built in $(( $(date +%s) - start ))s"
