#!/usr/bin/env bash
# Mount tracefs and bpffs where a fresh machine has neither.
set -euo pipefail
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
