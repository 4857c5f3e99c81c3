#!/usr/bin/env bash
# Install what a local node needs besides the kubelet (which hack/setup-k8s.sh
# builds): containerd, runc and the CNI plugins from Debian 12, and the
# DHCP clients the network tests run as a guest would (busybox's udhcpc,
# dhcpcd for DHCPv6 and router advertisements). Nothing is
# started here: internal/testenv starts containerd and the kubelet per run.
# Idempotent; a warm run takes well under a second. Needs root.
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins nftables busybox dhcpcd-base)
die() { echo "setup-node: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-node: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's package starts nothing without systemd; a containerd started by
# an init script would serve /run/containerd, which testenv does not use.
echo "setup-node: containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | head -1 | awk '{print $3}')"
