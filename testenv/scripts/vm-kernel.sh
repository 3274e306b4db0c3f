#!/usr/bin/env bash
# Fetch Debian's cloud kernels once, for the kernel matrix test that boots
# each under qemu (collector/kernel TestKernelMatrix): vm-kernel.sh OUT
# writes OUT/<name>/vmlinuz (and the .deb it came from) for every row below
# and prints the directories. The suites come from extra sources lists under
# OUT/apt/<suite>/, never from the machine's own sources.
set -euo pipefail
out=$1
mirror=http://deb.debian.org/debian
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# name        suite               arch   metapackage
kernels="
amd64-5.10    bullseye            amd64  linux-image-cloud-amd64
amd64-6.1     bookworm            amd64  linux-image-cloud-amd64
amd64-6.12    bookworm-backports  amd64  linux-image-cloud-amd64
arm64         bookworm            arm64  linux-image-cloud-arm64
"

# apt_suite SUITE CMD ARGS...: apt-get/apt-cache with state of its own.
apt_suite() {
  local suite=$1 cmd=$2; shift 2
  local d="$out/apt/$suite"
  "$cmd" -q -o Dir::Etc::sourcelist="$d/sources.list" -o Dir::Etc::sourceparts=/dev/null \
    -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache" \
    -o APT::Architectures::=amd64 -o APT::Architectures::=arm64 "$@"
}

suite_ready() {
  local suite=$1 d="$out/apt/$1"
  [ -s "$d/sources.list" ] && compgen -G "$d/lists/*Packages*" >/dev/null && return 0
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
  echo "deb [signed-by=$keyring arch=amd64,arm64] $mirror $suite main" >"$d/sources.list"
  apt_suite "$suite" apt-get -qq update
}

# image_package SUITE ARCH META: the versioned linux-image package META depends on.
image_package() {
  apt_suite "$1" apt-cache depends "$3:$2" 2>/dev/null | awk '/Depends: linux-image-[0-9]/{sub(/:.*/,"",$2); print $2; exit}'
}

fetch() {
  local name=$1 suite=$2 arch=$3 meta=$4 dir="$out/$1"
  if [ -s "$dir/vmlinuz" ]; then echo "$dir"; return; fi
  mkdir -p "$dir"
  local deb
  deb=$(compgen -G "$dir/linux-image-*.deb" | head -1 || true)
  if [ -z "$deb" ]; then
    suite_ready "$suite"
    local pkg; pkg=$(image_package "$suite" "$arch" "$meta")
    [ -n "$pkg" ] || { echo "no $meta in $suite" >&2; exit 1; }
    echo ">> downloading $pkg ($suite, $arch) into $dir" >&2
    (cd "$dir" && apt_suite "$suite" apt-get -qq -o APT::Sandbox::User=root download "$pkg:$arch" >/dev/null)
    deb=$(compgen -G "$dir/linux-image-*.deb" | head -1)
  fi
  local tmp; tmp=$(mktemp -d)
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*' './lib/modules/*/kernel/drivers/net/veth.ko*'
  cp "$tmp"/lib/modules/*/kernel/drivers/net/veth.ko* "$dir/" 2>/dev/null || true
  cp "$tmp"/boot/vmlinuz-* "$dir/vmlinuz.tmp" && mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
  rm -rf "$tmp"
  echo "$dir"
}

while read -r name suite arch meta; do
  if [ -n "$name" ]; then fetch "$name" "$suite" "$arch" "$meta"; fi
done <<<"$kernels"
