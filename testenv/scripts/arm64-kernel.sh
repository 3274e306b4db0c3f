#!/usr/bin/env bash
# Fetch Debian bookworm's arm64 cloud kernel once into OUT (default
# .cache/vmkernel/arm64): the .deb is kept there, and its raw arm64 Image is
# extracted as OUT/vmlinuz. It is the source of bpf/vmlinux/vmlinux_arm64.h
# (make vmlinux-arm64) and the kernel an arm64 guest boots under
# qemu-system-aarch64. Prints the vmlinuz path.
#
# The machine's own apt sources are amd64 only and stay untouched: an extra
# sources list for arm64 with its own lists and cache directories.
set -euo pipefail
out=${1:-.cache/vmkernel/arm64}
if [ -s "$out/vmlinuz" ]; then echo "$out/vmlinuz"; exit 0; fi
mkdir -p "$out"
apt=$(mktemp -d); trap 'rm -rf "$apt"' EXIT
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$apt/sources.list" <<SOURCES
deb [arch=arm64 signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb [arch=arm64 signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main
SOURCES
opts=(-o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
  -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Dir::State::status=/dev/null
  -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o APT::Sandbox::User=root)
apt-get -qq "${opts[@]}" update
name=$(apt-cache "${opts[@]}" depends linux-image-cloud-arm64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$name" ] || { echo "arm64-kernel: no linux-image-*-cloud-arm64 in bookworm" >&2; exit 1; }
echo ">> downloading $name (arm64)" >&2
(cd "$out" && apt-get -q "${opts[@]}" download "$name:arm64" >/dev/null)
deb=$(ls "$out"/"${name}"_*_arm64.deb | head -n 1)
dpkg-deb --fsys-tarfile "$deb" | tar -x -O --wildcards './boot/vmlinuz-*' >"$out/vmlinuz.$$"
mv "$out/vmlinuz.$$" "$out/vmlinuz"
echo "$out/vmlinuz"
