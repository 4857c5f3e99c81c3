#!/usr/bin/env bash
# Every test, as `make test` runs them after `make test-deps` and `make verify`,
# with `make lint` beside them at the lowest CPU priority (nice 19): the test
# suites leave a part of the two cores idle while they wait on guests, kubelets
# and probe periods, and lint takes only that part instead of minutes of its
# own before the first test. Lint includes the Go SDK's API check against the
# last release (hack/apidiff.sh). Its output is printed at the end (and kept in
# _output/lint.log); make test fails if lint or any test fails.
#
# The order of the suites:
#   - test/e2e, the longest package (about 20 minutes), is listed first so that
#     go test builds and starts it first and the other packages run beside it;
#   - internal/testenv, whose node test waits for test/e2e's node (one kubelet
#     per machine), is listed last so that its wait holds up no other package;
#   - the two-node end-to-end tests run after the others: only one cluster runs
#     on a machine, and test/e2e's single-node cluster would otherwise wait for
#     theirs (or they for it);
#   - then hack/images' own module.
#
# usage: [GO_TEST_FLAGS='-count=1 -timeout 30m'] hack/test.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
read -r -a flags <<<"${GO_TEST_FLAGS:--count=1 -timeout 30m}"
# go test's own vet pass (a subset of go vet's checks) is off: lint runs the
# whole of go vet beside the tests, and each pass analyses every dependency
# for its facts, 2.6 CPU-minutes of a cold run. The test binaries are linked
# without DWARF (-w; stack traces keep file and line), a quarter less CPU per
# link.
flags+=(-vet=off -ldflags=-w)
mkdir -p _output
log=_output/lint.log

nice -n 19 hack/lint.sh >"$log" 2>&1 &
lint=$!
trap 'kill "$lint" 2>/dev/null' EXIT

status=0
pkgs=$(go list ./...) || exit 1
mapfile -t rest < <(grep -v -e /test/e2e2node -e '/test/e2e$' -e /internal/testenv <<<"$pkgs")
go test "${flags[@]}" ./test/e2e "${rest[@]}" ./internal/testenv || status=1
go test "${flags[@]}" ./test/e2e2node || status=1
(cd hack/images && go test "${flags[@]}" ./...) || status=1

if wait "$lint"; then
  tail -n 1 "$log"
else
  cat "$log" >&2
  echo "test: lint failed (above; also in $log)" >&2
  status=1
fi
trap - EXIT
exit "$status"
