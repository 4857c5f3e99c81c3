#!/usr/bin/env bash
# gofmt, go vet and the pinned staticcheck over the whole module, and the Go
# SDK's API check against the last release (hack/apidiff.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ -x _output/bin/staticcheck ] || hack/tools.sh
unformatted=$(gofmt -l $(git ls-files -co --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2; echo "$unformatted" >&2; exit 1
fi
go vet ./...
_output/bin/staticcheck ./...
(cd hack/tools && go vet ./... && "$ROOT/_output/bin/staticcheck" ./...)
(cd hack/images && go vet ./... && "$ROOT/_output/bin/staticcheck" ./...)
# The embedding example is its own module (controller-runtime stays out of the SDK's go.mod).
(cd examples/embed && go build -o /dev/null . && go vet ./... && "$ROOT/_output/bin/staticcheck" ./...)
hack/apidiff.sh
echo "lint clean"
