#!/usr/bin/env bash
# Build the cloud guest: a small Debian 12 disk image of the kind users boot
# from a container disk, made from Debian's packages only (mmdebstrap from
# the mirror apt uses; nothing downloaded from anywhere else):
#   debian-12-cloud.qcow2   a 1 GiB disk (MBR, one ext4 partition) that boots
#                           with BIOS through GRUB: Debian 12 with the cloud
#                           kernel (linux-image-cloud-amd64), systemd,
#                           cloud-init (NoCloud and ConfigDrive), the QEMU
#                           guest agent, OpenSSH and systemd-networkd with
#                           systemd-resolved (DHCP on every NIC unless
#                           cloud-init's network data says otherwise);
#                           Debian's default user "debian" (locked; keys
#                           and passwords come from cloud-init)
#   packages.txt            the image's packages and versions
# Trimmed to boot quickly under TCG: no docs, man pages or translations, no
# apt lists, apt's and other timers off, GRUB's timeout 0, the kernel's
# console on ttyS0 and tty0, only the cloud-init modules a test guest needs.
# SSH host keys are not in the image: cloud-init makes them at first boot.
#
# usage: hack/make-cloud-guest.sh [outdir]   (default: _output/cloud-guest)
# Idempotent: does nothing when the outputs of this CLOUD_GUEST_VERSION
# exist. Needs root (mmdebstrap's root mode chroots). Installs mmdebstrap
# and qemu-utils on the host when they are missing. Debian packages are
# cached in <outdir>/debs, so a rebuild downloads only what changed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/_output/cloud-guest}
# Bump when the guest changes: a guest built by an older script is rebuilt.
CLOUD_GUEST_VERSION=1
DISK=debian-12-cloud.qcow2
DISK_SIZE_MIB=1024
SUITE=bookworm
# Debian's mirrors, as the host's apt reaches them.
MIRRORS=(
  "deb http://deb.debian.org/debian $SUITE main"
  "deb http://deb.debian.org/debian $SUITE-updates main"
  "deb http://deb.debian.org/debian-security $SUITE-security main"
)
# On top of the Essential packages and apt (mmdebstrap's apt variant).
PACKAGES=(
  systemd-sysv systemd-resolved udev kmod dbus linux-image-cloud-amd64 initramfs-tools zstd
  grub-pc-bin
  cloud-init qemu-guest-agent openssh-server sudo
  iproute2 iputils-ping netbase procps less ca-certificates
)
# Fixed identities: the root file system's UUID (GRUB and /etc/fstab find it
# by this) and the MBR's disk signature.
ROOT_UUID=7a6c8f52-3b1d-4c1e-9a57-5d0c2f8e1b01
DISK_SIG=0x766d6b74 # "vmkt"

log() { echo "make-cloud-guest: $*"; }
die() { echo "make-cloud-guest: $*" >&2; exit 1; }
now() { date +%s; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -s "$OUT/$DISK" ] && [ "$(cat "$OUT/cloud-guest.version" 2>/dev/null)" = "$CLOUD_GUEST_VERSION" ]; then
  log "cloud guest already built in $OUT"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap --mode=root chroots into the new system)"
start=$(now)
apt_opts=(-q -o DPkg::Lock::Timeout=300)
missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v qemu-img >/dev/null || missing+=(qemu-utils)
command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
if [ ${#missing[@]} -gt 0 ]; then
  if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
    apt-get "${apt_opts[@]}" update >/dev/null
  fi
  log "installing ${missing[*]} on the host"
  DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d "$OUT/.work.XXXXXX") # same filesystem: the final mv is atomic
# --one-file-system: never into what a failed mmdebstrap left mounted.
trap 'rm -rf --one-file-system "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$OUT/debs" "$work/boot"

# --- configuration the hooks copy in ---------------------------------------------
conf=$work/conf
mkdir -p "$conf"
# Before the kernel is installed: a small initramfs (the virtio, SCSI and
# SATA disk drivers; ext4 is built in), zstd-compressed.
cat >"$conf/initramfs.conf" <<'EOF'
MODULES=list
COMPRESS=zstd
EOF
cat >"$conf/initramfs-hook" <<'EOF'
#!/bin/sh
# vmkit: the disk drivers a KubeVirt VM's root disk may need (virtio, scsi, sata).
case "$1" in prereqs) exit 0 ;; esac
. /usr/share/initramfs-tools/hook-functions
manual_add_modules virtio_pci virtio_blk virtio_scsi sd_mod sr_mod ahci ata_piix
EOF
cat >"$conf/fstab" <<EOF
UUID=$ROOT_UUID / ext4 rw,discard,errors=remount-ro 0 1
EOF
# cloud-init: only the data sources vmkit (KubeVirt) provides, systemd-networkd
# as the network renderer, and none of the modules that only cost boot time in
# a container-disk guest (the disk cannot grow; apt, locales, NTP and
# keyboard stay as they are).
cat >"$conf/cloud.cfg" <<'EOF'
# vmkit (hack/make-cloud-guest.sh)
datasource_list: [NoCloud, ConfigDrive, None]
system_info:
  network:
    renderers: [networkd]
ssh_genkeytypes: [ed25519, ecdsa]
cloud_init_modules:
  - migrator
  - seed_random
  - bootcmd
  - write-files
  - set_hostname
  - update_hostname
  - update_etc_hosts
  - rsyslog
  - users-groups
  - ssh
cloud_config_modules:
  - ssh-import-id
  - set-passwords
  - timezone
  - disable-ec2-metadata
  - runcmd
cloud_final_modules:
  - package-update-upgrade-install
  - write-files-deferred
  - scripts-vendor
  - scripts-per-once
  - scripts-per-boot
  - scripts-per-instance
  - scripts-user
  - ssh-authkey-fingerprints
  - keys-to-console
  - install-hotplug
  - phone-home
  - final-message
  - power-state-change
EOF
# DHCP on every Ethernet NIC when cloud-init has written nothing (its
# network config, written to /run/systemd/network, comes first).
cat >"$conf/99-dhcp.network" <<'EOF'
[Match]
Type=ether
Name=en* eth*

[Network]
DHCP=yes
EOF
cat >"$conf/grub-early.cfg" <<EOF
search --no-floppy --fs-uuid --set=root $ROOT_UUID
set prefix=(\$root)/boot/grub
EOF
cmdline="root=UUID=$ROOT_UUID ro console=tty0 console=ttyS0,115200n8 mitigations=off tsc=reliable no_timer_check"
cat >"$conf/grub.cfg" <<EOF
# vmkit (hack/make-cloud-guest.sh): no menu, the serial console and the screen.
set timeout=0
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
menuentry 'Debian GNU/Linux 12 (cloud)' {
  insmod ext2
  search --no-floppy --fs-uuid --set=root $ROOT_UUID
  linux /vmlinuz $cmdline
  initrd /initrd.img
}
EOF
# Units a short-lived test VM does not need (timers, binfmt, debug file
# systems, modules nothing here uses), masked.
MASK_UNITS=(apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer
  dpkg-db-backup.timer logrotate.timer man-db.timer systemd-pstore.service
  systemd-binfmt.service proc-sys-fs-binfmt_misc.automount dev-hugepages.mount sys-kernel-debug.mount
  sys-kernel-tracing.mount sys-fs-fuse-connections.mount
  modprobe@drm.service modprobe@fuse.service modprobe@loop.service modprobe@dm_mod.service modprobe@efi_pstore.service)
# Modules udev would load for QEMU's devices that a test guest does not use
# (KVM inside the guest, the PC speaker, CPU frequency drivers).
cat >"$conf/blacklist.conf" <<'EOF2'
# vmkit (hack/make-cloud-guest.sh): not needed in a test guest, slow to load under TCG.
blacklist kvm
blacklist kvm_amd
blacklist kvm_intel
blacklist pcspkr
blacklist powernow_k8
blacklist acpi_cpufreq
EOF2
# sshd refuses to start without host keys, which cloud-init makes only when
# it runs (a VM without cloud-init data): make an Ed25519 key then.
cat >"$conf/ssh-hostkey.conf" <<'EOF2'
[Service]
ExecStartPre=/bin/sh -c 'ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key'
EOF2

# --- the root file system -------------------------------------------------------
log "mmdebstrap $SUITE with: ${PACKAGES[*]}"
t=$(now)
mmdebstrap --mode=root --variant=apt --format=directory \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --skip=download/empty \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
  --setup-hook="sync-in '$OUT/debs' /var/cache/apt/archives" \
  --essential-hook="mkdir -p \"\$1\"/etc/initramfs-tools/conf.d \"\$1\"/etc/initramfs-tools/hooks && cp '$conf/initramfs.conf' \"\$1\"/etc/initramfs-tools/conf.d/vmkit.conf && install -m 755 '$conf/initramfs-hook' \"\$1\"/etc/initramfs-tools/hooks/vmkit" \
  --customize-hook="sync-out /var/cache/apt/archives '$OUT/debs'" \
  --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
  "$SUITE" "$rootfs" "${MIRRORS[@]}"
log "root file system in $(($(now) - t)) s"

# --- configure ----------------------------------------------------------------------
cp "$conf/fstab" "$rootfs/etc/fstab"
cp "$conf/cloud.cfg" "$rootfs/etc/cloud/cloud.cfg.d/90_vmkit.cfg"
cp "$conf/99-dhcp.network" "$rootfs/etc/systemd/network/99-dhcp.network"
echo debian >"$rootfs/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$rootfs/etc/hosts"
# A fresh machine-id and SSH host keys per VM.
: >"$rootfs/etc/machine-id"
rm -f "$rootfs"/etc/ssh/ssh_host_*
cp "$conf/blacklist.conf" "$rootfs/etc/modprobe.d/vmkit-blacklist.conf"
mkdir -p "$rootfs/etc/systemd/system/ssh.service.d"
cp "$conf/ssh-hostkey.conf" "$rootfs/etc/systemd/system/ssh.service.d/vmkit-hostkey.conf"
chroot "$rootfs" systemctl enable --quiet systemd-networkd.service
chroot "$rootfs" systemctl mask --quiet "${MASK_UNITS[@]}"
# GRUB for BIOS: core.img (with the modules to find and read the root file
# system) goes into the gap before the partition, boot.img into the MBR;
# the other modules go to /boot/grub/i386-pc, as grub-install lays them out.
mkdir -p "$rootfs/boot/grub/i386-pc"
cp "$rootfs"/usr/lib/grub/i386-pc/*.mod "$rootfs"/usr/lib/grub/i386-pc/*.lst "$rootfs/boot/grub/i386-pc/"
cp "$conf/grub.cfg" "$rootfs/boot/grub/grub.cfg"
cp "$conf/grub-early.cfg" "$rootfs/tmp/grub-early.cfg"
chroot "$rootfs" grub-mkimage -O i386-pc -o /tmp/core.img -p /boot/grub -c /tmp/grub-early.cfg \
  biosdisk part_msdos ext2 search search_fs_uuid normal configfile linux serial terminal echo test
mv "$rootfs/tmp/core.img" "$work/boot/core.img"
cp "$rootfs/usr/lib/grub/i386-pc/boot.img" "$work/boot/boot.img"
rm -f "$rootfs/tmp/grub-early.cfg"
# GRUB's tools were needed for core.img only.
chroot "$rootfs" apt-get -q -y purge --autoremove grub-pc-bin grub-common >/dev/null
chroot "$rootfs" dpkg-query -W -f='${Package} ${Version}\n' >"$work/packages.txt"
# Left by the build: apt's caches, logs.
rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log \
  "$rootfs"/var/log/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old

# --- the disk -----------------------------------------------------------------------
# MBR: GRUB's boot.img (its first 440 bytes), the disk signature, one active
# Linux partition from 1 MiB to the end; core.img in sectors 1-2047.
part_start=2048
part_sectors=$((DISK_SIZE_MIB * 2048 - part_start))
used_mib=$(du -sm --apparent-size "$rootfs" | cut -f1)
[ "$used_mib" -lt $((DISK_SIZE_MIB * 3 / 4)) ] || die "the root file system takes $used_mib MiB, too much for a $DISK_SIZE_MIB MiB disk"
[ "$(stat -c %s "$work/boot/core.img")" -le $(((part_start - 1) * 512)) ] || die "GRUB's core.img does not fit before the partition"
t=$(now)
mkfs.ext4 -q -L root -U "$ROOT_UUID" -E root_owner=0:0 -d "$rootfs" "$work/root.ext4" "$((part_sectors / 2))k"
raw=$work/disk.raw
truncate -s "${DISK_SIZE_MIB}M" "$raw"
dd if="$work/boot/boot.img" of="$raw" bs=440 count=1 conv=notrunc status=none
dd if="$work/boot/core.img" of="$raw" bs=512 seek=1 conv=notrunc status=none
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))\\x$(printf %02x $((($1 >> 16) & 255)))\\x$(printf %02x $((($1 >> 24) & 255)))"; }
{
  le32 $((DISK_SIG)); printf '\0\0'
  # boot flag, CHS start (unused: LBA), type 0x83, CHS end, LBA start, sectors
  printf '\x80\xfe\xff\xff\x83\xfe\xff\xff'; le32 $part_start; le32 $part_sectors
  head -c 48 /dev/zero
  printf '\x55\xaa'
} | dd of="$raw" bs=1 seek=440 conv=notrunc status=none
dd if="$work/root.ext4" of="$raw" bs=1M seek=1 conv=notrunc,sparse status=none
rm "$work/root.ext4"
# Compressed: the image is a third of the size; QEMU inflates a cluster
# when the guest first reads it.
qemu-img convert -c -f raw -O qcow2 "$raw" "$work/$DISK"
log "disk made in $(($(now) - t)) s"

mv -f "$work/$DISK" "$OUT/$DISK"
mv -f "$work/packages.txt" "$OUT/packages.txt"
echo "$CLOUD_GUEST_VERSION" >"$OUT/cloud-guest.version"
log "built in $(($(now) - start)) s: $OUT/$DISK ($(du -m --apparent-size "$OUT/$DISK" | cut -f1) MiB; root file system $used_mib MiB; $(wc -l <"$OUT/packages.txt") packages)"
