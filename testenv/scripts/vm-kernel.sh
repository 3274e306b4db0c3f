#!/usr/bin/env bash
# Fetch Debian's cloud kernel (6.1, bookworm) once, for the test that boots a
# second kernel under qemu and checks the probes' fallbacks there
# (collector.TestOtherKernelInVM). Prints the vmlinuz path.
set -euo pipefail
out=$1
if [ -s "$out/vmlinuz" ]; then echo "$out/vmlinuz"; exit 0; fi
mkdir -p "$out"
pkg() { apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
name=$(pkg)
if [ -z "$name" ] || ! (cd "$tmp" && apt-get download -q "$name" >/dev/null 2>&1); then
  apt-get update -qq
  name=$(pkg)
  (cd "$tmp" && apt-get download -q "$name" >/dev/null)
fi
echo ">> extracting $name for the second-kernel test" >&2
dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
cp "$tmp"/boot/vmlinuz-* "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
echo "$out/vmlinuz"
