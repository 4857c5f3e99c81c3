#!/usr/bin/env bash
# Smoke-test the launcher image's file system, as written by
#   (cd hack/images && go run . -images virt-launcher -launcher-rootfs DIR)
# with chroot, the way the launcher container uses it:
#   1. every binary the launcher runs finds its shared libraries;
#   2. virt-launcher --help and qemu-system-x86_64 --version run;
#   3. virtlogd and libvirtd start as virt-launcher starts them (no
#      arguments, in the foreground), libvirtd answers `virsh capabilities`
#      and `virsh domcapabilities` (the host's virsh, through the socket in
#      DIR), and with GUEST_DIR (hack/make-guest.sh) a guest boots under TCG
#      to its GUEST-BOOTED marker with a TPM (libvirt runs swtpm_setup and
#      swtpm from the image), which its kernel finds.
# Step 3 runs in new mount, PID and network namespaces: proc, sys and dev are
# mounted into DIR only there, the daemons cannot touch the host's network,
# and nothing outlives the check (the daemons are stopped by PID, and the
# namespace's PID 1 takes whatever is left with it). The host's own libvirtd
# is not involved: the chroot has its own /run. DIR is scratch (the guest's
# files are copied into its /tmp).
#
# usage: hack/images/check-launcher.sh DIR [GUEST_DIR]    Needs root.
set -euo pipefail

log() { echo "check-launcher: $*"; }
die() { echo "check-launcher: $*" >&2; exit 1; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# --- step 3, inside the namespaces ---------------------------------------------
if [ "${1:-}" = "--in-namespaces" ]; then
  R=$2 GUEST=$3
  sock=$R/run/libvirt/libvirt-sock
  uri="qemu:///system?socket=$sock"
  logs=$R/tmp/vmkit-check
  pids=()
  mounted=()
  # shellcheck disable=SC2317 # called by the EXIT trap
  cleanup() {
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
      kill -TERM "${pids[$i]}" 2>/dev/null || true
      wait "${pids[$i]}" 2>/dev/null || true
    done
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
      umount "${mounted[$i]}" || true
    done
  }
  trap cleanup EXIT
  mkdir -p "$R/proc" "$R/sys" "$R/dev" "$logs"
  mount -t proc proc "$R/proc"
  mounted+=("$R/proc")
  mount --bind /sys "$R/sys"
  mounted+=("$R/sys")
  mount --bind /dev "$R/dev"
  mounted+=("$R/dev")

  # As cmd/virt-launcher's startLibvirt: both without arguments, in the
  # foreground, virtlogd first.
  chroot "$R" /usr/sbin/virtlogd >"$logs/virtlogd.log" 2>&1 &
  pids+=($!)
  chroot "$R" /usr/sbin/libvirtd >"$logs/libvirtd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    [ -S "$sock" ] && break
    kill -0 "${pids[1]}" 2>/dev/null || { cat "$logs/libvirtd.log" >&2; die "libvirtd exited"; }
    sleep 0.1
  done
  [ -S "$sock" ] || { cat "$logs/libvirtd.log" >&2; die "libvirtd made no socket within 10 s"; }
  start=$(date +%s%N)
  caps=$(virsh -c "$uri" capabilities) || { cat "$logs/libvirtd.log" >&2; die "virsh capabilities failed"; }
  grep -q "<emulator>/usr/bin/qemu-system-x86_64</emulator>" <<<"$caps" ||
    { echo "$caps" >&2; die "libvirtd reports no x86_64 QEMU guest"; }
  log "virsh capabilities: x86_64 QEMU guests ($(ms_since "$start") ms, the first call probes QEMU)"
  virsh -c "$uri" domcapabilities --virttype qemu --arch x86_64 >/dev/null ||
    die "virsh domcapabilities failed"
  log "virsh domcapabilities: ok"

  if [ -n "$GUEST" ]; then
    cp "$GUEST/vmlinux" "$GUEST/initramfs.cpio.gz" "$logs/"
    cat >"$logs/domain.xml" <<EOF
<domain type='qemu'>
  <name>vmkit-image-check</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>/tmp/vmkit-check/vmlinux</kernel>
    <initrd>/tmp/vmkit-check/initramfs.cpio.gz</initrd>
    <cmdline>console=ttyS0 panic=-1 tpm_tis.force=1</cmdline>
  </os>
  <features><acpi/></features>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'><source path='/tmp/vmkit-check/console.log'/><target port='0'/></serial>
    <memballoon model='none'/>
    <tpm model='tpm-tis'><backend type='emulator' version='2.0'/></tpm>
  </devices>
</domain>
EOF
    start=$(date +%s%N)
    virsh -c "$uri" create "$logs/domain.xml" >/dev/null || { cat "$logs/libvirtd.log" >&2; die "virsh create failed"; }
    for _ in $(seq 1 300); do
      grep -qs GUEST-BOOTED "$logs/console.log" && break
      sleep 0.1
    done
    grep -qs GUEST-BOOTED "$logs/console.log" || {
      cat "$logs/console.log" "$R/var/log/libvirt/qemu/vmkit-image-check.log" >&2 || true
      virsh -c "$uri" destroy vmkit-image-check >/dev/null 2>&1 || true
      die "the guest did not print GUEST-BOOTED within 30 s"
    }
    log "guest booted under TCG: $(grep -a GUEST-BOOTED "$logs/console.log" | tr -d '\r') ($(ms_since "$start") ms from virsh create)"
    # The TIS probe's line (tpm_tis.force=1: the vmlinux PVH boot leaves
    # no usable ACPI tables when the machine has a TPM).
    tpm=$(grep -a -m1 ': 2\.0 TPM (device-id' "$logs/console.log" | tr -d '\r') || {
      cat "$logs/console.log" "$R/var/log/swtpm/libvirt/qemu/vmkit-image-check-swtpm.log" >&2 || true
      virsh -c "$uri" destroy vmkit-image-check >/dev/null 2>&1 || true
      die "the guest's kernel found no TPM 2.0"
    }
    log "guest found its TPM (swtpm): $tpm"
    virsh -c "$uri" destroy vmkit-image-check >/dev/null 2>&1 || true # it powers itself off
  fi
  exit 0
fi

# --- steps 1 and 2 ----------------------------------------------------------------
if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: $0 DIR [GUEST_DIR]"; fi
[ "$(id -u)" -eq 0 ] || die "must run as root (chroot, mount)"
R=$(cd "$1" && pwd)
GUEST=${2:-}
if [ -n "$GUEST" ]; then
  GUEST=$(cd "$GUEST" && pwd)
  if [ ! -s "$GUEST/vmlinux" ] || [ ! -s "$GUEST/initramfs.cpio.gz" ]; then
    die "$GUEST has no vmlinux and initramfs.cpio.gz: run hack/make-guest.sh $GUEST"
  fi
fi
for tool in chroot unshare virsh; do
  command -v "$tool" >/dev/null || die "$tool not found (virsh: install it with hack/setup-libvirt.sh)"
done

for bin in /usr/bin/virt-launcher /usr/sbin/libvirtd /usr/sbin/virtlogd /usr/bin/qemu-system-x86_64 /usr/bin/qemu-img; do
  [ -x "$R$bin" ] || die "$bin is missing from $R"
  libs=$(chroot "$R" /lib64/ld-linux-x86-64.so.2 --list "$bin" 2>&1) || die "$bin: $libs"
  if grep -q "not found" <<<"$libs"; then
    die "$bin misses shared libraries: $(grep "not found" <<<"$libs" | tr '\n' ' ')"
  fi
done
log "virt-launcher, libvirtd, virtlogd, qemu-system-x86_64 and qemu-img find all their shared libraries"

out=$(chroot "$R" /usr/bin/virt-launcher --help 2>&1 || true) # exits 1 after printing the usage
grep -q "Usage of virt-launcher" <<<"$out" || die "virt-launcher --help: $out"
log "virt-launcher --help: ok"
ver=$(chroot "$R" /usr/bin/qemu-system-x86_64 --version) || die "qemu-system-x86_64 --version: $ver"
log "$(head -n 1 <<<"$ver")"

unshare --mount --pid --fork --net --propagation private -- "$0" --in-namespaces "$R" "$GUEST"
