#!/usr/bin/env bash
# Build the local cluster's DNS server, CoreDNS (github.com/coredns/coredns),
# from the Go module proxy into $OUT (default _output/bin/coredns), with the
# plugins a Kubernetes cluster's DNS uses (kubernetes, forward, cache, ...).
# internal/testenv runs it beside kube-proxy and gives the kubelets its
# Service address as clusterDNS (docs/cluster.md, "Cluster DNS").
#
# The build happens in a scratch module (hack/proxy-build-lib.sh), so that
# vmkit's go.mod never sees CoreDNS's dependencies. Idempotent: a binary
# whose stamp ($OUT.version) names the wanted version and plugins is kept.
# Cold: about 3 min on 2 cores with a cold module cache; warm: instant.
#
# usage: [OUT=_output/bin/coredns] hack/build-coredns.sh
set -euo pipefail
COREDNS_MODULE=github.com/coredns/coredns
COREDNS_VERSION=v1.12.1
# In CoreDNS's plugin.cfg order, which is the order they run in.
PLUGINS=(bind reload ready health errors log loadbalance cache kubernetes loop forward)
. "$(dirname "$0")/proxy-build-lib.sh"

write_sources() {
  printf 'module corednsbuild\n\ngo 1.26.3\n\nrequire %s %s\n' "$COREDNS_MODULE" "$COREDNS_VERSION" >go.mod
  {
    printf 'package main\n\nimport (\n\t"%s/core/dnsserver"\n\t"%s/coremain"\n\n' "$COREDNS_MODULE" "$COREDNS_MODULE"
    for p in "${PLUGINS[@]}"; do printf '\t_ "%s/plugin/%s"\n' "$COREDNS_MODULE" "$p"; done
    printf ')\n\nfunc init() {\n\tdnsserver.Directives = []string{'
    local sep=""
    for p in "${PLUGINS[@]}"; do printf '%s"%s"' "$sep" "$p"; sep=", "; done
    printf '}\n}\n\nfunc main() { coremain.Run() }\n'
  } >main.go
}
proxy_build build-coredns "${OUT:-$ROOT/_output/bin/coredns}" "$COREDNS_MODULE@$COREDNS_VERSION ${PLUGINS[*]}" write_sources \
  -ldflags "-s -w" .
