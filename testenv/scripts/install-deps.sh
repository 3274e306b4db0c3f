#!/usr/bin/env bash
# Install what a fresh Debian machine lacks for building and testing drainwatch.
# Idempotent: it only calls apt-get when a tool is missing.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have clang-14 || need+=(clang-14)
have llvm-strip || need+=(llvm)
[ -e /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
have bpftool || need+=(bpftool)
have ip || need+=(iproute2)
have nginx || need+=(nginx-light)
have haproxy || need+=(haproxy)
have nft || need+=(nftables) # testenv/l7 holds back pods' FINs with an nft rule

have promtool || need+=(prometheus) # same package
have wrk || need+=(wrk)
have chromium || need+=(chromium)
have openssl || need+=(openssl)
have python3 || need+=(python3)
# testenv/e2e's requests-killed-at-exit test runs Node.js under Debian's tini.
have node || need+=(nodejs)
have tini || need+=(tini)
have qemu-system-x86_64 || need+=(qemu-system-x86)
have qemu-system-aarch64 || need+=(qemu-system-arm)
have nsenter || need+=(util-linux)
# testenv/kubeproxy runs the real kube-proxy, whose nftables mode drives the
# nft binary and whose iptables mode iptables-restore (Debian: nft backend).
have nft || need+=(nftables)
have iptables-restore || need+=(iptables)
# testenv/runtime runs the image under Debian's containerd (1.6) and runc.
have containerd || need+=(containerd)
have runc || need+=(runc)
# testenv/realnode: the CNI bridge, host-local and loopback plugins.
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  echo ">> installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
