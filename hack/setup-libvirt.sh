#!/usr/bin/env bash
# Install libvirt 9.0 + QEMU 7.2 from Debian 12 and run the daemons without
# systemd, so integration tests can reach qemu:///system. Needs root.
#
# Idempotent: packages, the libvirt-qemu account and qemu.conf are only touched
# when missing, and daemons are only started when their pid file does not name
# a live process. A warm run takes about a second.
#
# Undo with hack/stop-libvirt.sh.
set -euo pipefail

URI=${VMKIT_LIBVIRT_URI:-qemu:///system}
SOCKET=/run/libvirt/libvirt-sock
VIRTLOGD_PID=/run/virtlogd.pid
LIBVIRTD_PID=/run/libvirtd.pid
LOG_DIR=/var/log/libvirt
QEMU_CONF=/etc/libvirt/qemu.conf

# libvirt-daemon-system is deliberately absent: it pulls in systemd. xorriso
# writes the launcher's cloud-init and config disk ISOs (as in the launcher
# image); genisoimage's isoinfo checks them (nodeagent/launcher tests).
PACKAGES=(
  libvirt-daemon libvirt-daemon-driver-qemu qemu-system-x86 libvirt-clients
  libvirt-dev pkg-config libxml2-utils tini genisoimage xorriso swtpm swtpm-tools
)

log() { echo "setup-libvirt: $*"; }
die() { echo "setup-libvirt: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root"

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

# running PIDFILE: the pid file exists and names a live process.
running() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# --- packages ---------------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-q -o DPkg::Lock::Timeout=300)
  apt-get "${apt_opts[@]}" update >/dev/null
  apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- account ----------------------------------------------------------------
# The QEMU driver refuses to initialise unless its compiled-in user exists
# (normally created by libvirt-daemon-system's maintainer scripts).
if ! getent group libvirt-qemu >/dev/null; then
  log "creating group libvirt-qemu"
  groupadd --system libvirt-qemu
fi
if ! getent passwd libvirt-qemu >/dev/null; then
  log "creating user libvirt-qemu"
  useradd --system --gid libvirt-qemu --home-dir /var/lib/libvirt \
    --no-create-home --shell /usr/sbin/nologin libvirt-qemu
fi
mkdir -p "$LOG_DIR" /var/lib/libvirt /var/cache/libvirt /run/libvirt

# --- qemu.conf ----------------------------------------------------------------
# Run QEMU as root without a security driver: no DAC/file-permission trouble
# with test files, and no capability re-probe on every API call (which happens
# when /dev/kvm is root-only and QEMU runs as libvirt-qemu).
if ! grep -qs '^[[:space:]]*user[[:space:]]*=[[:space:]]*"root"' "$QEMU_CONF"; then
  log "configuring $QEMU_CONF to run QEMU as root"
  mkdir -p "$(dirname "$QEMU_CONF")"
  cat >>"$QEMU_CONF" <<'EOF'
# Added by vmkit hack/setup-libvirt.sh: run QEMU as root, no security driver.
user = "root"
group = "root"
security_driver = "none"
EOF
fi

# --- daemons ------------------------------------------------------------------
if ! running "$VIRTLOGD_PID"; then
  log "starting virtlogd"
  /usr/sbin/virtlogd --daemon --pid-file "$VIRTLOGD_PID"
fi

if ! running "$LIBVIRTD_PID"; then
  log "starting libvirtd"
  # Without a child subreaper, exited QEMU processes linger as zombies until
  # PID 1 reaps them, and virDomainDestroy takes ~2 s instead of ~0.2 s.
  # tini -s makes itself the subreaper; setsid detaches from this shell.
  setsid tini -s -- /usr/sbin/libvirtd --pid-file "$LIBVIRTD_PID" \
    </dev/null >>"$LOG_DIR/libvirtd.stdout" 2>&1 &
  up() { running "$LIBVIRTD_PID" && [ -S "$SOCKET" ]; }
  for _ in $(seq 1 150); do
    up && break
    sleep 0.1
  done
  up || die "libvirtd did not come up within 15 s; see $LOG_DIR/libvirtd.stdout"
fi

# The first connection after start probes QEMU's capabilities (3-8 s); later
# calls answer in milliseconds.
for attempt in 1 2 3; do
  if out=$(virsh -c "$URI" version 2>&1); then
    echo "$out"
    exit 0
  fi
  sleep "$attempt"
done
echo "$out" >&2
die "virsh -c $URI version failed; see $LOG_DIR/libvirtd.stdout"
