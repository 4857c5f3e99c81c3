#!/usr/bin/env bash
# make demo-local: build and install what the demo needs (each step idempotent and
# cached under _output/), then run hack/demo, which boots examples/vm-tiny.yaml
# on this machine and stops it again. Needs root (libvirt).
# DEMO_WAIT=1 keeps everything up until Ctrl-C and prints a KUBECONFIG.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/_output
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$OUT/k8s-bin}
export VMKIT_GUEST_DIR=${VMKIT_GUEST_DIR:-$OUT/guest}

# step NAME CMD...: run CMD, print how long it took, name the step on failure.
step() {
  local name=$1; shift
  local began=${EPOCHREALTIME/[.,]/} took
  echo "==> $name"
  if ! "$@"; then
    echo "demo FAILED: step \"$name\" (command: $*)" >&2
    exit 1
  fi
  took=$(( (${EPOCHREALTIME/[.,]/} - began) / 1000 ))
  echo "    done in $((took / 1000)).$(printf %03d $((took % 1000)))s"
}

step "Kubernetes control plane binaries (hack/setup-k8s.sh)" \
  env CMDS="kube-apiserver" hack/setup-k8s.sh
step "libvirt + QEMU, daemons running (hack/setup-libvirt.sh)" hack/setup-libvirt.sh
step "tiny guest (hack/make-guest.sh)" hack/make-guest.sh "$VMKIT_GUEST_DIR"
step "virt-launcher and the demo (go build)" \
  bash -c "go build -o '$OUT/bin/virt-launcher' ./cmd/virt-launcher && go build -o '$OUT/bin/demo' ./hack/demo"

args=(-launcher "$OUT/bin/virt-launcher" -guest-dir "$VMKIT_GUEST_DIR")
[ "${DEMO_WAIT:-0}" = 1 ] && args+=(-wait)
exec "$OUT/bin/demo" "${args[@]}"
