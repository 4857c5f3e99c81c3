# Sourced by hack/demo.sh and hack/demo-local.sh: the environment both demos
# share and their timed steps. Sets ROOT and OUT and changes to ROOT.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/_output
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$OUT/k8s-bin}
export VMKIT_GUEST_DIR=${VMKIT_GUEST_DIR:-$OUT/guest}

# step NAME CMD...: run CMD, print how long it took, name the step on failure.
step() {
  local name=$1; shift
  local began=${EPOCHREALTIME/[.,]/} took
  echo "==> $name"
  if ! "$@"; then
    echo "demo FAILED: step \"$name\" (command: $*)" >&2
    exit 1
  fi
  took=$(( (${EPOCHREALTIME/[.,]/} - began) / 1000 ))
  echo "    done in $((took / 1000)).$(printf %03d $((took % 1000)))s"
}
