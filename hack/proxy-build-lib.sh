# Sourced by hack/build-registry.sh and hack/build-coredns.sh: build a
# program from the Go module proxy in a scratch module under _output, so that
# vmkit's go.mod never sees its dependencies, and keep it while its stamp
# ($out.version) names what was built.
#
# proxy_build NAME OUT WANT WRITE_SOURCES BUILD_ARGS...
#   NAME           what is built, for messages (e.g. build-registry)
#   OUT            the binary to write
#   WANT           the stamp: module@version and whatever else decides the build
#   WRITE_SOURCES  a function writing go.mod and the sources in the current
#                  (scratch) directory
#   BUILD_ARGS     go build's flags and package (e.g. -ldflags ... ./cmd/x)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

proxy_build() {
  local name=$1 out=$2 want=$3 write=$4
  shift 4
  out=$(realpath -m "$out")
  if [ -x "$out" ] && [ "$(cat "$out.version" 2>/dev/null)" = "$want" ]; then
    echo "$name: already built ($want): $out"
    return 0
  fi
  echo "$name: building $want from the Go module proxy"
  local start work=$ROOT/_output/${name#build-}-build
  start=$(date +%s)
  rm -rf "$work"
  mkdir -p "$work" "$(dirname "$out")"
  (
    cd "$work"
    "$write"
    go mod tidy
    CGO_ENABLED=0 go build -trimpath -o "$out.tmp" "$@"
  )
  mv -f "$out.tmp" "$out"
  echo "$want" >"$out.version"
  echo "$name: built $out in $(($(date +%s) - start)) s"
}
