#!/usr/bin/env bash
# make demo: build what the demo needs (cached under _output/), then run it.
# DEMO_WAIT=1 keeps the control plane up until Ctrl-C.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
hack/setup-k8s.sh
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/_output/k8s-bin}
args=()
[ "${DEMO_WAIT:-0}" = 1 ] && args+=(-wait)
exec go run ./hack/demo "${args[@]}"
