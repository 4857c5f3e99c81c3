#!/usr/bin/env bash
# Build vmkit's container images as archives, without a registry or a
# container engine: the local cluster pushes them to its OCI registry
# (internal/registry), `make release` to any registry (hack/release.sh), and
# `ctr -n k8s.io images import`, docker load and podman load read them too:
#   $OUT/pause.tar            registry.k8s.io/pause:3.10
#   $OUT/virt-operator.tar    vmkit/virt-operator:$TAG
#   $OUT/virt-controller.tar  vmkit/virt-controller:$TAG
#   $OUT/virt-api.tar         vmkit/virt-api:$TAG
#   $OUT/virt-handler.tar     vmkit/virt-handler:$TAG
#   $OUT/virt-exportserver.tar  vmkit/virt-exportserver:$TAG
#   $OUT/virt-launcher.tar    vmkit/virt-launcher:$TAG (libvirt + QEMU from Debian)
#   $OUT/tiny-guest.tar       vmkit/tiny-guest:$TAG and :latest
#   $OUT/local-path-provisioner.tar  vmkit/local-path-provisioner:$TAG (hack/build-storage.sh)
#   $OUT/busybox.tar          vmkit/busybox:$TAG and :latest (Debian's busybox-static)
#   $OUT/cloud-guest.tar      vmkit/cloud-guest:$TAG and :latest (hack/make-cloud-guest.sh:
#                             Debian 12 with cloud-init, a qcow2 container disk)
# It fetches the web console's libraries (hack/build-webconsole.sh, npm),
# builds the binaries into _output/image-bin, makes the test guests
# (hack/make-guest.sh, hack/make-cloud-guest.sh) when they are missing,
# runs hack/images (go run), and, as root, checks the launcher's file
# system with chroot (hack/images/check-launcher.sh: shared libraries,
# --help/--version, virtlogd + libvirtd + a TCG guest boot in throw-away
# namespaces).
# See docs/images.md.
#
# usage: [TAG=devel] [OUT=_output/images] [VERIFY=1] [SOURCE_DATE_EPOCH=0] hack/build-images.sh
# Idempotent; Debian packages are cached in _output/debs. Reproducible: the
# same sources, guest and package versions give the same image digests.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TAG=${TAG:-devel}
OUT=$(realpath -m "${OUT:-$ROOT/_output/images}")
BIN=$ROOT/_output/image-bin
WORK=$ROOT/_output/image-work
GUEST_DIR=$(realpath -m "${VMKIT_GUEST_DIR:-$ROOT/_output/guest}")
CLOUD_GUEST_DIR=$(realpath -m "${VMKIT_CLOUD_GUEST_DIR:-$ROOT/_output/cloud-guest}")
if [ "$(id -u)" -eq 0 ]; then VERIFY=${VERIFY:-1}; else VERIFY=${VERIFY:-0}; fi

log() { echo "build-images: $*"; }
die() { echo "build-images: $*" >&2; exit 1; }
now() { date +%s%N; }
took() { echo "$((($(now) - $1) / 1000000)) ms"; }

cd "$ROOT"
for tool in go apt-get apt-cache dpkg-deb dpkg; do
  command -v "$tool" >/dev/null || die "$tool not found (the image build needs Go and Debian's apt and dpkg)"
done
# virt-launcher links libvirt through cgo (libvirt.org/go/libvirt).
if ! command -v pkg-config >/dev/null || ! pkg-config --exists libvirt; then
  die "libvirt-dev and pkg-config are missing (virt-launcher is built with cgo against libvirt): install them with hack/setup-libvirt.sh"
fi
if ! apt-cache show qemu-system-x86 >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "apt knows no packages yet: run apt-get update as root"
  log "apt knows no packages yet: apt-get update"
  apt-get -q -o DPkg::Lock::Timeout=300 update >/dev/null
fi
if [ "$VERIFY" = 1 ] && [ "$(id -u)" -ne 0 ]; then
  die "VERIFY=1 needs root (chroot, mount); run as root or with VERIFY=0"
fi

# --- binaries -------------------------------------------------------------------
mkdir -p "$BIN"
start=$(now)
build=(go build -trimpath -buildvcs=false)
# The four control-plane binaries are linked statically (their images hold
# no libc) but compiled with cgo on, as the tests, go vet, virt-launcher and
# Kubernetes (hack/setup-k8s.sh) are: with CGO_ENABLED=0 every package that
# imports net would be compiled a second time, almost 4 minutes of a cold run
# on 2 cores (docs/development.md). glibc's static link warns that getpwnam
# and getaddrinfo would need its shared NSS modules at run time; the files
# and dns sources are built into glibc since 2.34, and Go resolves names
# itself unless /etc/nsswitch.conf asks otherwise, so the warnings are
# silenced (--no-warnings) and hack/images checks that the result is static.
static=(-ldflags '-linkmode external -extldflags "-static -Wl,--no-warnings"')
# virt-api embeds the web console's browser libraries (npm, pinned).
hack/build-webconsole.sh
CGO_ENABLED=1 "${build[@]}" "${static[@]}" -o "$BIN/" ./cmd/virt-operator ./cmd/virt-controller ./cmd/virt-api ./cmd/virt-handler ./cmd/virt-exportserver
if [ -d cmd/container-disk ]; then
  CGO_ENABLED=0 "${build[@]}" -o "$BIN/" ./cmd/container-disk
else
  rm -f "$BIN/container-disk"
  log "WARNING: cmd/container-disk does not exist: the virt-launcher image gets NO /usr/bin/container-disk"
fi
CGO_ENABLED=1 "${build[@]}" -o "$BIN/" ./cmd/virt-launcher
(cd hack/images && CGO_ENABLED=0 "${build[@]}" -o "$BIN/pause" ./pause)
BIN="$BIN" hack/build-storage.sh # the local cluster's storage provisioner, from the module proxy
log "binaries built into $BIN in $(took "$start")"

# --- test guest -------------------------------------------------------------------
hack/make-guest.sh "$GUEST_DIR" # does nothing when the guest is complete
hack/make-cloud-guest.sh "$CLOUD_GUEST_DIR" # likewise

# --- images -----------------------------------------------------------------------
start=$(now)
rootfs=()
if [ "$VERIFY" = 1 ]; then
  rootfs=(-launcher-rootfs "$WORK/launcher-rootfs")
else
  log "VERIFY=0: the launcher's file system is not checked"
fi
(cd hack/images && go run . -root "$ROOT" -out "$OUT" -bin "$BIN" -work "$WORK" \
  -debs "$ROOT/_output/debs" -guest "$GUEST_DIR" -cloud-guest "$CLOUD_GUEST_DIR" -tag "$TAG" "${rootfs[@]}")
log "images written to $OUT in $(took "$start")"

if [ "$VERIFY" = 1 ]; then
  start=$(now)
  hack/images/check-launcher.sh "$WORK/launcher-rootfs" "$GUEST_DIR"
  log "launcher checked in $(took "$start")"
fi
ls -l "$OUT"/*.tar
