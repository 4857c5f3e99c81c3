#!/usr/bin/env bash
# Build the local cluster's storage provisioner, Rancher's
# local-path-provisioner, from the Go module proxy into
# $BIN/local-path-provisioner (default _output/image-bin, where hack/images
# finds the binaries it packs; hack/build-images.sh runs this first). See
# docs/cluster.md ("Storage") for why this provisioner and not the CSI
# hostpath driver.
#
# The build happens in a scratch module under _output/storage-build, so that
# vmkit's go.mod never sees the provisioner's dependencies. The proxy's
# checksum database does not know v0.0.37, so the module is checked against
# the hash pinned here instead (the h1: hash of the v0.0.37 tag's tree on
# GitHub); its dependencies are checked against the checksum database as
# usual. Idempotent: a binary that reports the wanted version is kept.
# Cold: about 1 min on 2 cores when the tests' dependencies are already
# compiled (module download a few seconds with a warm module cache); warm:
# instant.
#
# usage: [BIN=_output/image-bin] hack/build-storage.sh
set -euo pipefail
LOCAL_PATH_VERSION=v0.0.37
LOCAL_PATH_MODULE=github.com/rancher/local-path-provisioner
LOCAL_PATH_SUM=h1:xRGhYXH31HtfbYWA9Qe8zAqCmHuw4dDRZNrDlWe0OQg=
LOCAL_PATH_MODSUM=h1:0HbWPjgPwrSumhQdlYvD6Day+FvR+0NXjGUJBl8McfA=

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath -m "${BIN:-$ROOT/_output/image-bin}")
WORK=$ROOT/_output/storage-build
out=$BIN/local-path-provisioner

if [ -x "$out" ] && "$out" --version 2>/dev/null | grep -qx "local-path-provisioner version $LOCAL_PATH_VERSION"; then
  echo "build-storage: local-path-provisioner $LOCAL_PATH_VERSION already built: $out"
  exit 0
fi
echo "build-storage: building local-path-provisioner $LOCAL_PATH_VERSION from the Go module proxy (about 2 min cold)"
start=$(date +%s)
rm -rf "$WORK"
mkdir -p "$WORK" "$BIN"
cd "$WORK"
printf 'module storagebuild\n\ngo 1.26.3\n\nrequire %s %s\n' "$LOCAL_PATH_MODULE" "$LOCAL_PATH_VERSION" >go.mod
printf '%s %s %s\n%s %s/go.mod %s\n' "$LOCAL_PATH_MODULE" "$LOCAL_PATH_VERSION" "$LOCAL_PATH_SUM" \
  "$LOCAL_PATH_MODULE" "$LOCAL_PATH_VERSION" "$LOCAL_PATH_MODSUM" >go.sum
printf '//go:build tools\n\npackage storagebuild\n\nimport _ "%s"\n' "$LOCAL_PATH_MODULE" >tools.go
export GONOSUMDB=$LOCAL_PATH_MODULE
go mod tidy
# vmkit's versions of the modules both use, and vmkit's build flags (cgo on,
# linked statically as hack/build-images.sh links the control plane's
# binaries): client-go and the rest are then compiled once, for vmkit and
# this (hack/share-versions.sh).
"$ROOT/hack/share-versions.sh" "$LOCAL_PATH_MODULE"
CGO_ENABLED=1 go build -trimpath \
  -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION -linkmode external -extldflags '-static -Wl,--no-warnings'" \
  -o "$out.tmp" "$LOCAL_PATH_MODULE"
mv -f "$out.tmp" "$out"
echo "build-storage: built $out in $(($(date +%s) - start)) s"
