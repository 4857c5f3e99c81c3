#!/usr/bin/env bash
# Give a module that builds tools or images beside vmkit (hack/setup-k8s.sh's
# scratch module for Kubernetes, hack/build-storage.sh's for the storage
# provisioner, hack/tools) vmkit's version of every module whose packages both
# compile, so that go's build cache compiles k8s.io/api, apimachinery,
# client-go and their dependencies once for it and for vmkit's tests, go vet
# and images: a package is shared only when it and all it imports are the same
# versions built with the same flags (-trimpath, cgo on). Where the other
# module needs a higher version than vmkit's, the higher one wins (raise
# vmkit's go.mod to share it); this prints those.
#
# usage: hack/share-versions.sh PACKAGE...  (in that module's directory, after go mod tidy)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || { echo "usage: $0 PACKAGE..." >&2; exit 2; }

# The modules whose packages these packages (and their dependencies) compile.
compiled() { go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@" | sort -u; }
ours=$(cd "$ROOT" && compiled -test ./...)
edits=()
while read -r m v; do edits+=("-require=$m@$v"); done < <(join <(echo "$ours") <(compiled "$@") | awk '$2 != $3 {print $1, $2}')
if [ ${#edits[@]} -gt 0 ]; then
  go mod edit "${edits[@]}"
  go mod tidy
fi
join <(echo "$ours") <(compiled "$@") | awk '$2 != $3 {printf "share-versions: %s is %s here, %s in vmkit: packages that import it are compiled twice\n", $1, $3, $2}'
