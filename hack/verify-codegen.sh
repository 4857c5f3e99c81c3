#!/usr/bin/env bash
# Fail when the committed generated code (deepcopy, clientset, listers,
# informers, CRDs) differs from what hack/update-codegen.sh produces. The
# generated files are regenerated in place, so after a failure the tree holds
# the current output and `git diff` shows what was stale.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
generated() {
  { find vmapi/generated vmapi/crds/manifests -type f 2>/dev/null; ls vmapi/v1/zz_generated.*.go vmapi/instancetype/v1beta1/zz_generated.*.go vmapi/pool/v1beta1/zz_generated.*.go vmapi/export/v1beta1/zz_generated.*.go vmapi/snapshot/v1beta1/zz_generated.*.go 2>/dev/null; } | sort
}
snapshot() { generated | xargs -r sha256sum; }
before=$(snapshot)
hack/update-codegen.sh >/dev/null
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "generated code is stale; run 'make generate' and commit the result:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
echo "generated code is current"
