#!/usr/bin/env bash
# make vmlinux-arm64: regenerate bpf/vmlinux/vmlinux_arm64.h from the BTF of
# Debian bookworm's arm64 cloud kernel (fetched once by arm64-kernel.sh). CO-RE
# relocates against each node's own BTF at load time, so one kernel's header
# serves every arm64 kernel; only the architecture must match.
#   vmlinux-arm64.sh CACHE_DIR OUT_HEADER
set -euo pipefail
cache=$1 header=$2
go=${GO:-go}
image=$(bash testenv/scripts/arm64-kernel.sh "$cache")
btf=$(mktemp); trap 'rm -f "$btf"' EXIT
"$go" run ./tools/btfextract "$image" "$btf"
bpftool btf dump file "$btf" format c >"$header.tmp"
mv "$header.tmp" "$header"
echo ">> $header from $(ls "$cache"/linux-image-*_arm64.deb | xargs -n1 basename)" >&2
