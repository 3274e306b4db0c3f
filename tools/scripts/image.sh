#!/usr/bin/env bash
# make image: build the static binary per architecture and assemble the
# multi-architecture OCI image with tools/mkimage (no container
# engine). Every architecture asked for must build: an image that silently
# lacks one would fail only on the nodes of that architecture.
#   image.sh OUT_DIR VERSION ARCH...
set -euo pipefail
out=$1 version=$2; shift 2
go=${GO:-go}
[ $# -gt 0 ] || { echo "image: no architecture asked for" >&2; exit 1; }
mkdir -p "$out"
bins=()
for arch in "$@"; do
  dst=$out/linux_$arch/drainwatch
  if ! CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath \
       -ldflags "-s -w -X github.com/drainwatch/drainwatch/exporter.Version=$version" \
       -o "$dst" ./cmd/drainwatch 2>"$out/linux_$arch.build.log"; then
    echo "image: linux/$arch does not build (log: $out/linux_$arch.build.log):" >&2
    head -n 5 "$out/linux_$arch.build.log" | sed 's/^/image:   /' >&2
    exit 1
  fi
  api=$out/linux_$arch/drainwatch-apiserver
  if ! CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath \
       -ldflags "-s -w -X github.com/drainwatch/drainwatch/exporter.Version=$version" \
       -o "$api" ./cmd/drainwatch-apiserver 2>"$out/linux_$arch.apiserver.build.log"; then
    echo "image: drainwatch-apiserver for linux/$arch does not build (log: $out/linux_$arch.apiserver.build.log):" >&2
    head -n 5 "$out/linux_$arch.apiserver.build.log" | sed 's/^/image:   /' >&2
    exit 1
  fi
  bins+=(--bin "$arch=$dst" --apiserver-bin "$arch=$api")
done
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
"$go" run ./tools/mkimage "${bins[@]}" --version "$version" --revision "$revision" \
  --created "$created" --out "$out"
