#!/usr/bin/env bash
# make release: build vmkit's images for linux/amd64 and linux/arm64, push
# them to REGISTRY as multi-architecture indexes tagged VERSION, and write the
# release manifests (kubevirt-operator.yaml, kubevirt-cr.yaml, images.txt)
# into _output/release/VERSION, every component pinned by digest. A platform
# team installs with the two `kubectl create -f` docs/install.md gives.
#
#   REGISTRY=registry.example.com/vmkit VERSION=v0.1.0 hack/release.sh
#
# REGISTRY is host[:port][/path]; credentials come from `docker login` /
# `podman login` files ($DOCKER_CONFIG, ~/.docker/config.json,
# $REGISTRY_AUTH_FILE). INSECURE=1 talks plain HTTP (always for 127.0.0.1
# and localhost). ARCHES (default "amd64 arm64"): this machine's
# architecture gets every image, another one the four control-plane
# components only (static Go binaries, cross-compiled and checked by
# inspection: ELF machine and static linking); virt-launcher and the guest
# disks are this machine's architecture only (docs/install.md says why).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
: "${REGISTRY:?set REGISTRY, e.g. REGISTRY=registry.example.com/vmkit (make release REGISTRY=... VERSION=...)}"
: "${VERSION:?set VERSION, e.g. VERSION=v0.1.0}"
ARCHES=${ARCHES:-amd64 arm64}
OUT=$ROOT/_output/release/$VERSION
host=$(go env GOARCH)
log() { echo "release: $*"; }

rm -rf "$OUT/images"
archives=()
for arch in $ARCHES; do
  dir=$OUT/images/$arch
  if [ "$arch" = "$host" ]; then
    log "linux/$arch: every image (hack/build-images.sh)"
    TAG=$VERSION OUT=$dir hack/build-images.sh
  else
    log "linux/$arch: virt-operator, virt-controller, virt-api, virt-handler, virt-exportserver (cross-compiled, static)"
    bin=$ROOT/_output/image-bin-$arch
    mkdir -p "$bin"
    GOOS=linux GOARCH=$arch CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$bin/" \
      ./cmd/virt-operator ./cmd/virt-controller ./cmd/virt-api ./cmd/virt-handler ./cmd/virt-exportserver
    (cd hack/images && go run . -root "$ROOT" -arch "$arch" -bin "$bin" -out "$dir" -tag "$VERSION")
  fi
  archives+=("$arch=$dir")
done
go run ./hack/release -registry "$REGISTRY" -version "$VERSION" -archives "$(IFS=,; echo "${archives[*]}")" \
  -out "$OUT" ${INSECURE:+-insecure}
cat <<MSG

release $VERSION is in $REGISTRY. Install it on a cluster (docs/install.md):
    kubectl create -f $OUT/kubevirt-operator.yaml
    kubectl create -f $OUT/kubevirt-cr.yaml
    kubectl -n kubevirt wait kv kubevirt --for condition=Available --timeout=10m
Record the Go SDK's API of this release (docs/api-compatibility.md) and tag it:
    hack/apidiff.sh -baseline $VERSION && git add hack/api && git commit -m "vmkit $VERSION's Go API" && git tag -a $VERSION -m "vmkit $VERSION"
MSG
