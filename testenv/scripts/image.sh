#!/usr/bin/env bash
# make image: build the static binary per architecture and assemble the OCI
# image with testenv/cmd/mkimage (no container engine). An architecture whose
# binary does not build is left out, loudly: arm64 lacks its eBPF objects
# until issue 10 generates them.
#   image.sh OUT_DIR VERSION ARCH...
set -euo pipefail
out=$1 version=$2; shift 2
go=${GO:-go}
mkdir -p "$out"
bins=() missing=()
for arch in "$@"; do
  dst=$out/linux_$arch/drainwatch
  if CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath \
       -ldflags "-s -w -X github.com/drainwatch/drainwatch/exporter.Version=$version" \
       -o "$dst" ./cmd/drainwatch 2>"$out/linux_$arch.build.log"; then
    bins+=(--bin "$arch=$dst")
  else
    missing+=("$arch")
    echo "image: linux/$arch NOT BUILT: 'GOARCH=$arch go build ./cmd/drainwatch' fails (log: $out/linux_$arch.build.log):" >&2
    head -n 3 "$out/linux_$arch.build.log" | sed 's/^/image:   /' >&2
  fi
done
[ ${#bins[@]} -gt 0 ] || { echo "image: no architecture builds" >&2; exit 1; }
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
"$go" run ./testenv/cmd/mkimage "${bins[@]}" --version "$version" --revision "$revision" \
  --created "$created" --out "$out"
[ ${#missing[@]} -eq 0 ] || echo "image: WITHOUT ${missing[*]} (see above); the index holds only what built" >&2
