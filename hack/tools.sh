#!/usr/bin/env bash
# Build the pinned code generators, linters and apidiff (hack/apidiff.sh) of
# hack/tools/go.mod into _output/bin. Idempotent: go build reuses its cache,
# so a warm run is fast.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$ROOT/_output/bin"
cd "$ROOT/hack/tools"
go build -o "$ROOT/_output/bin/" \
  k8s.io/code-generator/cmd/deepcopy-gen \
  k8s.io/code-generator/cmd/client-gen \
  k8s.io/code-generator/cmd/lister-gen \
  k8s.io/code-generator/cmd/informer-gen \
  sigs.k8s.io/controller-tools/cmd/controller-gen \
  honnef.co/go/tools/cmd/staticcheck \
  golang.org/x/exp/cmd/apidiff
