#!/usr/bin/env bash
# Build Multus (gopkg.in/k8snetworkplumbingwg/multus-cni.v4, the "thin"
# CNI plugin that attaches a pod's secondary networks from its
# k8s.v1.cni.cncf.io/networks annotation and NetworkAttachmentDefinitions)
# from the Go module proxy into $OUT (default _output/bin/multus).
# internal/testenv puts it in front of every node's pod network, as a
# cluster with Multus installed has it (docs/cluster.md, "Secondary
# networks").
#
# It builds in a copy of the module's source, with the dependency versions
# its own go.mod and go.sum pin, fetched from the module proxy, so vmkit's
# go.mod never sees them. (`go install ...@version` would ask the proxy for
# the module's version list, which it refuses.) Idempotent: a binary whose
# stamp ($OUT.version) names the wanted version is kept. Measured: 7.5 min
# with a cold module cache while another job used the 2 cores (niced), 2 s
# with a warm build cache.
#
# usage: [OUT=_output/bin/multus] hack/build-multus.sh
set -euo pipefail
MULTUS_MODULE=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
MULTUS_VERSION=v4.1.4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${OUT:-$ROOT/_output/bin/multus}")
want="$MULTUS_MODULE@$MULTUS_VERSION cmd/multus"
if [ -x "$out" ] && [ "$(cat "$out.version" 2>/dev/null)" = "$want" ]; then
  echo "build-multus: already built ($want): $out"
  exit 0
fi
echo "build-multus: building $want from the Go module proxy"
start=$(date +%s)
src=$(cd "${TMPDIR:-/tmp}" && go mod download -json "$MULTUS_MODULE@$MULTUS_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -f "$src/go.mod" ]; then
  echo "build-multus: go mod download $MULTUS_MODULE@$MULTUS_VERSION gave no module source ($src)" >&2
  exit 1
fi
work=$ROOT/_output/multus-build
rm -rf "$work"
mkdir -p "$(dirname "$out")"
cp -r "$src" "$work"
chmod -R u+w "$work"
rm -rf "$work/vendor" # the zip keeps only vendor/modules.txt
(cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$out.tmp" ./cmd/multus)
mv -f "$out.tmp" "$out"
echo "$want" >"$out.version"
rm -rf "$work"
echo "build-multus: built $out in $(($(date +%s) - start)) s"
