#!/usr/bin/env bash
# Install what the tests need (`make test-deps`), each step idempotent and
# cached under _output/:
#   - containerd, runc and the CNI plugins (hack/setup-node.sh), libvirt and
#     QEMU (hack/setup-libvirt.sh), headless Chromium for the web console's
#     browser test (hack/setup-browser.sh), the tiny test guest
#     (hack/make-guest.sh);
#   - Kubernetes and etcd from source (hack/setup-k8s.sh), with the Debian
#     cloud guest (hack/make-cloud-guest.sh) built beside it: mmdebstrap
#     mostly waits on downloads and dpkg (about half a core for 2 minutes),
#     so it takes the CPU the compile leaves rather than minutes of its own;
#   - vmkit's images (hack/build-images.sh), for the end-to-end tests on a
#     real kubelet, the OCI registry the nodes pull them from
#     (hack/build-registry.sh), the cluster DNS server CoreDNS
#     (hack/build-coredns.sh), Multus for secondary networks
#     (hack/build-multus.sh), KubeVirt's own virtctl, which the end-to-end
#     tests drive vmkit with (hack/build-virtctl.sh), and the code tools
#     (hack/tools.sh).
# The apt steps come first, so that no two apt runs overlap.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
GUEST_DIR=${VMKIT_GUEST_DIR:-$ROOT/_output/guest}
CLOUD_GUEST_DIR=${VMKIT_CLOUD_GUEST_DIR:-$ROOT/_output/cloud-guest}
mkdir -p _output
log=_output/cloud-guest.log

hack/setup-node.sh
hack/setup-libvirt.sh
hack/setup-browser.sh
hack/make-guest.sh "$GUEST_DIR"

echo "hack/make-cloud-guest.sh $CLOUD_GUEST_DIR, beside Kubernetes' build (log: $log)"
hack/make-cloud-guest.sh "$CLOUD_GUEST_DIR" >"$log" 2>&1 &
guest=$!
# Never leave it running (a failed step ends this script): let it finish.
trap 'wait "$guest" 2>/dev/null' EXIT
hack/setup-k8s.sh
if ! wait "$guest"; then
  cat "$log" >&2
  echo "test-deps: hack/make-cloud-guest.sh failed (above; also in $log)" >&2
  exit 1
fi
trap - EXIT
cat "$log"

hack/build-images.sh
hack/build-registry.sh
hack/build-coredns.sh
hack/build-multus.sh
hack/build-virtctl.sh
hack/tools.sh
