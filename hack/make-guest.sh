#!/usr/bin/env bash
# Build the tiny direct-kernel-boot test guest from Debian packages (nothing is
# installed on the host):
#   vmlinuz                 Debian's bzImage
#   vmlinux                 the uncompressed ELF kernel (PVH entry; boots about
#                           twice as fast as vmlinuz under TCG)
#   initramfs.cpio.gz       busybox /init prints GUEST-BOOTED on the console,
#                           then powers off
#   initramfs-idle.cpio.gz  same, then idles until destroyed
# Boot with: console=ttyS0 panic=-1 quiet, machine pc, <acpi/>.
#
# usage: hack/make-guest.sh [outdir]   (default: _output/guest in the repo)
# Idempotent: does nothing when all outputs exist. Needs root (mknod).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/_output/guest}
KERNEL_META=${KERNEL_META:-linux-image-amd64}
OUTPUTS=(vmlinuz vmlinux initramfs.cpio.gz initramfs-idle.cpio.gz)

log() { echo "make-guest: $*"; }
die() { echo "make-guest: $*" >&2; exit 1; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

complete=true
for f in "${OUTPUTS[@]}"; do [ -s "$OUT/$f" ] || complete=false; done
if $complete; then
  log "guest already built in $OUT"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (mknod /dev/console in the initramfs)"
for tool in apt-get apt-cache dpkg-deb xz gzip; do
  command -v "$tool" >/dev/null || die "$tool not found"
done

work=$(mktemp -d "$OUT/.work.XXXXXX")   # same filesystem: the final mv is atomic
trap 'rm -rf "$work"' EXIT
cd "$work"

# --- download -----------------------------------------------------------------
apt_opts=(-q -o DPkg::Lock::Timeout=300 -o APT::Sandbox::User=root)
if ! apt-cache show "$KERNEL_META" >/dev/null 2>&1; then
  log "apt does not know $KERNEL_META yet: apt-get update"
  apt-get "${apt_opts[@]}" update >/dev/null
fi
# The meta package depends on the versioned image, e.g. linux-image-6.1.0-37-amd64.
kpkg=$(apt-cache depends "$KERNEL_META" |
  awk '!found && $1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; found = 1 }')
[ -n "$kpkg" ] || die "cannot resolve the kernel package behind $KERNEL_META"
log "downloading $kpkg and busybox-static"
apt-get "${apt_opts[@]}" download "$kpkg" busybox-static >/dev/null

# --- kernel -------------------------------------------------------------------
dpkg-deb --fsys-tarfile "${kpkg}"_*.deb | tar -x ./boot/
vmlinuz=(boot/vmlinuz-*)
[ -f "${vmlinuz[0]}" ] || die "no vmlinuz in $kpkg"
cp "${vmlinuz[0]}" vmlinuz
# Debian kernels are XZ-compressed: the payload starts at the first XZ magic.
# (grep may die of SIGPIPE once head has its line: not an error.)
off=$({ LC_ALL=C grep -aobP '\xfd7zXZ\x00' vmlinuz || true; } | head -n 1 | cut -d: -f1)
[ -n "$off" ] || die "no XZ payload found in ${vmlinuz[0]}"
# --single-stream makes xz ignore what follows the payload.
tail -c "+$((off + 1))" vmlinuz >payload.xz
xz -dc --single-stream payload.xz >vmlinux
[ "$(head -c 4 vmlinux | tail -c 3)" = ELF ] || die "extracted vmlinux is not an ELF image"

# --- initramfs ------------------------------------------------------------------
dpkg-deb -x busybox-static_*.deb busybox-pkg
bb=$work/busybox-pkg/bin/busybox
[ -x "$bb" ] || die "no busybox in busybox-static"

# make_initramfs NAME LAST-COMMAND
make_initramfs() {
  local name=$1 last=$2 root=$work/root-$1
  mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys"
  cp "$bb" "$root/bin/busybox"
  # init's stdout is /dev/console, which must exist inside the initramfs.
  mknod -m 600 "$root/dev/console" c 5 1
  mknod -m 666 "$root/dev/null" c 1 3
  cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
echo "GUEST-BOOTED uptime=\$(/bin/busybox cat /proc/uptime)"
$last
EOF
  chmod 755 "$root/init"
  (cd "$root" && find . | "$bb" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -9 >"$name.cpio.gz"
}
make_initramfs initramfs '/bin/busybox poweroff -f'
make_initramfs initramfs-idle 'while :; do /bin/busybox sleep 3600; done'

# Move complete files into place last, so an interrupted run never leaves a
# set of outputs that looks finished.
for f in "${OUTPUTS[@]}"; do mv -f "$f" "$OUT/$f"; done
log "built from $kpkg in $OUT:"
ls -l "${OUTPUTS[@]/#/$OUT/}"
