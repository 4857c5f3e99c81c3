#!/usr/bin/env bash
# Build the local cluster's OCI registry, the distribution project's
# registry (github.com/distribution/distribution/v3, "Docker registry 2"),
# from the Go module proxy into $OUT (default _output/bin/registry).
# internal/testenv runs it beside every node's containerd, which pulls all
# images through it (docs/cluster.md, "Registry"); make demo prints its
# address.
#
# The build happens in a scratch module (hack/proxy-build-lib.sh), so that
# vmkit's go.mod never sees the registry's dependencies (its cloud storage
# drivers among them). Idempotent: a binary whose stamp ($OUT.version) names
# the wanted module version is kept. Cold: about 2 min on 2 cores with a
# cold module cache; warm: instant.
#
# usage: [OUT=_output/bin/registry] hack/build-registry.sh
set -euo pipefail
REGISTRY_MODULE=github.com/distribution/distribution/v3
REGISTRY_VERSION=v3.1.2
. "$(dirname "$0")/proxy-build-lib.sh"

write_sources() {
  printf 'module registrybuild\n\ngo 1.26.3\n\nrequire %s %s\n' "$REGISTRY_MODULE" "$REGISTRY_VERSION" >go.mod
  printf '//go:build tools\n\npackage registrybuild\n\nimport _ "%s/cmd/registry"\n' "$REGISTRY_MODULE" >tools.go
}
proxy_build build-registry "${OUT:-$ROOT/_output/bin/registry}" "$REGISTRY_MODULE@$REGISTRY_VERSION" write_sources \
  -ldflags "-s -w -X $REGISTRY_MODULE/version.version=$REGISTRY_VERSION" "$REGISTRY_MODULE/cmd/registry"
