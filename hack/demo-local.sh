#!/usr/bin/env bash
# make demo-local: build and install what the demo needs (each step idempotent and
# cached under _output/), then run hack/demo, which boots examples/vm-tiny.yaml
# on this machine and stops it again. Needs root (libvirt).
# DEMO_WAIT=1 keeps everything up until Ctrl-C and prints a KUBECONFIG.
set -euo pipefail
. "$(dirname "$0")/demo-lib.sh"

step "Kubernetes control plane binaries (hack/setup-k8s.sh)" \
  env CMDS="kube-apiserver" hack/setup-k8s.sh
step "libvirt + QEMU, daemons running (hack/setup-libvirt.sh)" hack/setup-libvirt.sh
step "tiny guest (hack/make-guest.sh)" hack/make-guest.sh "$VMKIT_GUEST_DIR"
step "virt-launcher and the demo (go build)" \
  bash -c "go build -o '$OUT/bin/virt-launcher' ./cmd/virt-launcher && go build -o '$OUT/bin/demo' ./hack/demo"

args=(-launcher "$OUT/bin/virt-launcher" -guest-dir "$VMKIT_GUEST_DIR")
[ "${DEMO_WAIT:-0}" = 1 ] && args+=(-wait)
exec "$OUT/bin/demo" "${args[@]}"
