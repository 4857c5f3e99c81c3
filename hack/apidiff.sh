#!/usr/bin/env bash
# The Go SDK's API compatibility check (docs/api-compatibility.md, "API
# compatibility of the Go SDK"), with the pinned golang.org/x/exp/cmd/apidiff.
#
# hack/apidiff.sh
#   Compares the API of the module in this tree with the newest baseline,
#   hack/api/vX.Y.Z.export (the highest version there: no git tag is read), and
#   prints apidiff's report, incompatible changes then compatible ones. Fails
#   when an incompatible change is not listed in hack/api/accepted.txt, and
#   names each such change and how to accept it.
# hack/apidiff.sh -baseline vX.Y.Z
#   What a release does: writes hack/api/vX.Y.Z.export from this tree and
#   empties hack/api/accepted.txt. Commit both, then tag that commit vX.Y.Z.
#
# The API is the module's importable packages: no main package, none with only
# tests (docs, test/e2e), none under internal/ (apidiff ignores those too),
# cmd/, hack/ or test/. apidiff's module export holds every package of the
# module; hack/apiexport keeps those. Everything is built with -trimpath, so
# that the same tree gives the same bytes wherever it is checked out.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

usage() { echo "usage: $0 [-baseline vX.Y.Z]" >&2; exit 2; }
version=
case $# in
  0) ;;
  2)
    [ "$1" = -baseline ] || usage
    version=$2
    if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
      echo "apidiff: $version is not a release version vMAJOR.MINOR.PATCH" >&2; exit 2
    fi
    ;;
  *) usage ;;
esac

[ -x _output/bin/apidiff ] || hack/tools.sh
apidiff=$ROOT/_output/bin/apidiff
flags=$(go env GOFLAGS)
case " $flags " in
  *" -trimpath "*) ;;
  *) export GOFLAGS="${flags:+$flags }-trimpath" ;;
esac
export GOWORK=off
module=$(go list -m)
api=hack/api
accepted=$api/accepted.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# export_api FILE: the API of the module in this tree, as apidiff export data.
export_api() {
  go list -f '{{if and (ne .Name "main") (or .GoFiles .CgoFiles)}}{{.ImportPath}}{{end}}' ./... |
    grep -v -E -e '^$' -e "^${module//./\\.}/(cmd|hack|test)(/|\$)" -e '(^|/)internal(/|$)' >"$tmp/packages"
  "$apidiff" -m -w "$tmp/module.export" "$module"
  go run ./hack/apiexport -keep "$tmp/packages" "$tmp/module.export" "$1"
}

if [ -n "$version" ]; then
  mkdir -p "$api"
  export_api "$tmp/api.export"
  cp "$tmp/api.export" "$api/$version.export"
  : >"$accepted"
  echo "apidiff: wrote $api/$version.export ($(wc -l <"$tmp/packages") packages) and emptied $accepted;" \
    "commit both, then tag that commit $version"
  exit 0
fi

baseline=$(ls "$api" 2>/dev/null | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+\.export$' | sort -V | tail -n 1 || true)
if [ -z "$baseline" ]; then
  echo "apidiff: no baseline $api/vX.Y.Z.export; a release writes one: $0 -baseline vX.Y.Z" >&2
  exit 1
fi
release=${baseline%.export}
export_api "$tmp/current.export"

echo "apidiff: the API of this tree against $release's ($api/$baseline)"
"$apidiff" -m "$api/$baseline" "$tmp/current.export" >"$tmp/report"
if [ -s "$tmp/report" ]; then cat "$tmp/report"; else echo "no change"; fi
"$apidiff" -m -incompatible "$api/$baseline" "$tmp/current.export" >"$tmp/incompatible"

# accepted.txt: comment lines (#) and the accepted changes, each as apidiff prints it.
touch "$accepted"
grep -v -E '^(#|[[:space:]]*$)' "$accepted" | sed 's/[[:space:]]*$//' >"$tmp/accepted" || true
grep -v -x -F -f "$tmp/accepted" "$tmp/incompatible" >"$tmp/unaccepted" || true
grep -v -x -F -f "$tmp/incompatible" "$tmp/accepted" >"$tmp/stale" || true
if [ -s "$tmp/stale" ]; then
  echo "apidiff: $accepted accepts a change that apidiff no longer reports (remove its line):"
  cat "$tmp/stale"
fi
n=$(wc -l <"$tmp/unaccepted")
if [ "$n" -gt 0 ]; then
  {
    echo "apidiff: $n incompatible change(s) since $release not accepted in $accepted:"
    cat "$tmp/unaccepted"
    echo "Each breaks code in other modules that uses what changed. Undo the change, or accept it:"
    echo "add its line, exactly as printed above, to $accepted under a comment line that names"
    echo "the commit and says why the break is worth it and what users change, e.g."
    echo "  # <commit subject>: <why; what users of it do instead>"
    head -n 1 "$tmp/unaccepted" | sed 's/^/  /'
  } >&2
  exit 1
fi
if [ -s "$tmp/incompatible" ]; then
  echo "apidiff: $(wc -l <"$tmp/incompatible") incompatible change(s) since $release, all accepted in $accepted"
else
  echo "apidiff: no incompatible change since $release"
fi
