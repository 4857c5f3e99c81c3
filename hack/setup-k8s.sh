#!/usr/bin/env bash
# Build the real Kubernetes control plane and node binaries (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, and kubectl,
# which the demo and the drain test run) and etcd from the Go module
# proxy into _output/k8s-bin. Idempotent: binaries of the wanted versions are
# kept. The build happens in scratch modules because k8s.io/kubernetes needs
# replace directives for its staging modules, which must never enter vmkit's
# own go.mod.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-1.34.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${DEST:-$ROOT/_output/k8s-bin}
CMDS=${CMDS:-"kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"}
mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)

have() {
  [ -x "$DEST/$1" ] || return 1
  local out
  # Read the whole output before matching: `| grep -q` could exit on the
  # first line and fail the binary with SIGPIPE (and pipefail, the check).
  if [ "$1" = kubectl ]; then out=$("$DEST/kubectl" version --client 2>/dev/null) || return 1
  else out=$("$DEST/$1" --version 2>/dev/null) || return 1; fi
  grep -q -- "$2" <<<"$out"
}

need=""
for c in $CMDS; do have "$c" "v$K8S_VERSION" || need="$need $c"; done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

if [ -n "$need" ]; then
  echo "building Kubernetes v$K8S_VERSION:$need (about 15 min cold on 2 cores)"
  mkdir -p "$work/k8s"; cd "$work/k8s"
  staging="v0.${K8S_VERSION#1.}"
  printf 'module k8sbuild\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v%s\n' "$K8S_VERSION" > go.mod
  for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
    cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
    kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
    mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller; do
    echo "replace k8s.io/$m => k8s.io/$m $staging" >> go.mod
  done
  {
    echo '//go:build tools'
    echo 'package k8sbuild'
    echo 'import ('
    for c in $need; do echo "_ \"k8s.io/kubernetes/cmd/$c\""; done
    echo ')'
  } > tools.go
  # vmkit's versions of the modules both builds use, built with the flags
  # vmkit's tests, go vet and images build with (-trimpath and Go's default
  # CGO_ENABLED, 1 with gcc: the Makefile exports GOFLAGS=-trimpath), so that
  # go's build cache compiles k8s.io/api, apimachinery, client-go, apiserver
  # and their dependencies once for Kubernetes and vmkit instead of once per
  # set of versions and flags (hack/share-versions.sh).
  go mod tidy
  pkgs=""; for c in $need; do pkgs="$pkgs k8s.io/kubernetes/cmd/$c"; done
  "$ROOT/hack/share-versions.sh" $pkgs
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags="$ldflags -X k8s.io/component-base/version.gitTreeState=clean"
  go build -trimpath -ldflags "$ldflags" -o "$DEST/" $pkgs
fi

if ! have etcd "Version: $ETCD_VERSION"; then
  echo "building etcd v$ETCD_VERSION"
  mkdir -p "$work/etcd"; cd "$work/etcd"
  printf 'module etcdbuild\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > go.mod
  for m in api/v3 client/pkg/v3 client/v3 pkg/v3 server/v3; do
    echo "replace go.etcd.io/etcd/$m => go.etcd.io/etcd/$m v$ETCD_VERSION" >> go.mod
  done
  printf '//go:build tools\npackage etcdbuild\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy
  # As for Kubernetes: gRPC, protobuf, OpenTelemetry and the rest compiled once.
  "$ROOT/hack/share-versions.sh" go.etcd.io/etcd/server/v3
  go build -trimpath -ldflags "-s -w" -o "$DEST/etcd" go.etcd.io/etcd/server/v3
fi
echo "Kubernetes binaries ready in $DEST"
