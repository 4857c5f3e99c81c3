#!/usr/bin/env bash
# Install headless Chromium (Debian's chromium-headless-shell), which the
# web console's browser test (test/e2e TestWebConsole) drives with chromedp.
# Idempotent: does nothing when it is installed.
#
# usage: hack/setup-browser.sh   (as root)
set -euo pipefail
if [ -x /usr/bin/chromium-headless-shell ]; then
  echo "setup-browser: $(/usr/bin/chromium-headless-shell --version 2>/dev/null || echo chromium-headless-shell) installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-browser: chromium-headless-shell is missing: install it as root with apt-get install chromium-headless-shell" >&2
  exit 1
fi
echo "setup-browser: installing Debian's chromium-headless-shell"
apt-get -q -o DPkg::Lock::Timeout=300 update >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends chromium-headless-shell >/dev/null
/usr/bin/chromium-headless-shell --version
