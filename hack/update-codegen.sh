#!/usr/bin/env bash
# Regenerate everything generated from vmapi/v1: deepcopy, the typed
# clientset, listers and informers (k8s.io/code-generator), and the CRDs
# (controller-gen, then hack/crdpostprocess for the served v1alpha3 version).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
"$ROOT/hack/tools.sh"
BIN=$ROOT/_output/bin
MOD=github.com/vmkit/vmkit
API=$MOD/vmapi/v1
HDR=$ROOT/hack/boilerplate.go.txt

"$BIN/deepcopy-gen" --go-header-file "$HDR" --output-file zz_generated.deepcopy.go "$API"

rm -rf vmapi/generated
"$BIN/client-gen" --go-header-file "$HDR" --clientset-name versioned \
  --input-base "" --input "$API" \
  --output-dir vmapi/generated/clientset --output-pkg "$MOD/vmapi/generated/clientset"
"$BIN/lister-gen" --go-header-file "$HDR" \
  --output-dir vmapi/generated/listers --output-pkg "$MOD/vmapi/generated/listers" "$API"
"$BIN/informer-gen" --go-header-file "$HDR" \
  --versioned-clientset-package "$MOD/vmapi/generated/clientset/versioned" \
  --listers-package "$MOD/vmapi/generated/listers" \
  --output-dir vmapi/generated/informers --output-pkg "$MOD/vmapi/generated/informers" "$API"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$BIN/controller-gen" crd:crdVersions=v1 paths=./vmapi/v1/... output:crd:dir="$tmp"
(cd hack/tools && go run ./crdpostprocess -in "$tmp" -out "$ROOT/vmapi/crds/manifests")
