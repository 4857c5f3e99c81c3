#!/usr/bin/env bash
# Regenerate everything generated from the API packages (vmapi/v1 for
# kubevirt.io/v1, vmapi/instancetype/v1beta1 for instancetype.kubevirt.io/v1beta1,
# vmapi/pool/v1beta1 for pool.kubevirt.io/v1beta1, vmapi/export/v1beta1 for
# export.kubevirt.io/v1beta1, vmapi/snapshot/v1beta1 for snapshot.kubevirt.io/v1beta1):
# deepcopy, the typed clientset, listers and informers (k8s.io/code-generator),
# and the CRDs (controller-gen, then hack/crdpostprocess, which also serves
# kubevirt.io's v1alpha3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
"$ROOT/hack/tools.sh"
BIN=$ROOT/_output/bin
MOD=github.com/vmkit/vmkit
APIS=("$MOD/vmapi/v1" "$MOD/vmapi/instancetype/v1beta1" "$MOD/vmapi/pool/v1beta1" "$MOD/vmapi/export/v1beta1" "$MOD/vmapi/snapshot/v1beta1")
HDR=$ROOT/hack/boilerplate.go.txt

"$BIN/deepcopy-gen" --go-header-file "$HDR" --output-file zz_generated.deepcopy.go "${APIS[@]}"

rm -rf vmapi/generated
inputs=$(IFS=,; echo "${APIS[*]}")
"$BIN/client-gen" --go-header-file "$HDR" --clientset-name versioned \
  --input-base "" --input "$inputs" \
  --output-dir vmapi/generated/clientset --output-pkg "$MOD/vmapi/generated/clientset"
"$BIN/lister-gen" --go-header-file "$HDR" \
  --output-dir vmapi/generated/listers --output-pkg "$MOD/vmapi/generated/listers" "${APIS[@]}"
"$BIN/informer-gen" --go-header-file "$HDR" \
  --versioned-clientset-package "$MOD/vmapi/generated/clientset/versioned" \
  --listers-package "$MOD/vmapi/generated/listers" \
  --output-dir vmapi/generated/informers --output-pkg "$MOD/vmapi/generated/informers" "${APIS[@]}"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$BIN/controller-gen" crd:crdVersions=v1 paths=./vmapi/v1/... paths=./vmapi/instancetype/v1beta1/... paths=./vmapi/pool/v1beta1/... paths=./vmapi/export/v1beta1/... paths=./vmapi/snapshot/v1beta1/... output:crd:dir="$tmp"
(cd hack/tools && go run ./crdpostprocess -in "$tmp" -out "$ROOT/vmapi/crds/manifests")
