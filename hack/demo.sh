#!/usr/bin/env bash
# make demo: vmkit on a real single-node cluster of this machine, installed by
# its operator, with a VM that boots (hack/cluster up). DEMO_NODES=2 (make demo
# DEMO_NODES=2) runs two nodes, each its own containerd and kubelet. Each step installs or
# builds what it needs, idempotent and cached under _output/, and prints how
# long it took. The cluster keeps running afterwards; `make demo-down` stops
# it. Needs root (containerd, kubelet, mounts).
set -euo pipefail
. "$(dirname "$0")/demo-lib.sh"

step "Kubernetes v1.34.4 from source: control plane, kubelet, kube-proxy, kubectl (hack/setup-k8s.sh)" \
  hack/setup-k8s.sh
step "containerd + runc + CNI plugins from Debian (hack/setup-node.sh)" hack/setup-node.sh
step "libvirt headers for virt-launcher's build (hack/setup-libvirt.sh)" hack/setup-libvirt.sh
step "tiny guest (hack/make-guest.sh)" hack/make-guest.sh "$VMKIT_GUEST_DIR"
step "images: virt-operator, virt-controller, virt-api, virt-handler, virt-launcher, guest, storage (hack/build-images.sh)" \
  env VERIFY=0 hack/build-images.sh
step "the OCI registry the nodes pull every image from (hack/build-registry.sh)" hack/build-registry.sh
step "the cluster's DNS server, CoreDNS (hack/build-coredns.sh)" hack/build-coredns.sh
step "Multus, for secondary networks (hack/build-multus.sh)" hack/build-multus.sh
step "the demo driver (go build ./hack/cluster)" go build -o "$OUT/bin/cluster" ./hack/cluster
exec "$OUT/bin/cluster" up -nodes "${DEMO_NODES:-1}"
