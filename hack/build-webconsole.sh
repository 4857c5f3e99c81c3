#!/usr/bin/env bash
# Fetch the browser libraries virt-api's web console embeds (xterm.js, its
# fit add-on, noVNC) with npm, at the versions virtapi/webconsole's
# package-lock.json pins (`npm ci` checks each package's integrity hash),
# and copy the files the page loads into virtapi/webconsole/third_party/,
# which `go build` embeds into virt-api. Nothing of them is committed:
# third_party/ holds only its README in git. Installs Debian's npm when npm
# is missing. Idempotent: does nothing when third_party/ already holds what
# this lock file gives (its hash is recorded in third_party/.lock-sha256).
#
# usage: hack/build-webconsole.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=$ROOT/virtapi/webconsole
DST=$SRC/third_party
WORK=$ROOT/_output/webconsole
log() { echo "build-webconsole: $*"; }
die() { echo "build-webconsole: $*" >&2; exit 1; }

want=$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$DST/.lock-sha256" 2>/dev/null)" = "$want" ] && [ -f "$DST/xterm/xterm.mjs" ] && [ -f "$DST/novnc/core/rfb.js" ]; then
  log "up to date ($DST)"
  exit 0
fi
if ! command -v npm >/dev/null; then
  [ "$(id -u)" -eq 0 ] || die "npm is missing: install it with apt-get install npm (as root)"
  log "installing Debian's npm"
  apt-get -q -o DPkg::Lock::Timeout=300 update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends npm >/dev/null
fi
mkdir -p "$WORK"
cp "$SRC/package.json" "$SRC/package-lock.json" "$WORK/"
log "npm ci in $WORK"
(cd "$WORK" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci failed (is the npm registry reachable? npm config get registry: $(npm config get registry))"
m=$WORK/node_modules
# Only what the page loads, and each package's licence.
find "$DST" -mindepth 1 -not -name README.md -delete
mkdir -p "$DST/xterm" "$DST/novnc"
cp "$m/@xterm/xterm/lib/xterm.mjs" "$m/@xterm/xterm/css/xterm.css" "$m/@xterm/addon-fit/lib/addon-fit.mjs" "$DST/xterm/"
cp "$m/@xterm/xterm/LICENSE" "$DST/xterm/LICENSE"
cp -r "$m/@novnc/novnc/core" "$m/@novnc/novnc/vendor" "$m/@novnc/novnc/LICENSE.txt" "$DST/novnc/"
echo "$want" >"$DST/.lock-sha256"
log "done: $(du -sh "$DST" | cut -f1) in $DST"
