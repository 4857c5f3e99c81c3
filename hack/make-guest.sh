#!/usr/bin/env bash
# Build the tiny direct-kernel-boot test guest from Debian packages (nothing is
# installed on the host):
#   vmlinuz                 Debian's bzImage
#   vmlinux                 the uncompressed ELF kernel (PVH entry; boots about
#                           twice as fast as vmlinuz under TCG)
#   initramfs.cpio.gz       busybox /init prints GUEST-BOOTED on the console,
#                           then powers off
#   initramfs-idle.cpio.gz  same, then idles until destroyed
#   initramfs-agent.cpio.gz same as idle, plus Debian's QEMU guest agent:
#                           after GUEST-BOOTED it loads virtio_console (and
#                           virtio_net), starts qemu-ga on the virtio-serial
#                           port org.qemu.guest_agent.0 and asks for an
#                           address on eth0 by DHCP when there is one
#                           (taking the host name DHCP gives) and serves
#                           HTTP on ports 80 and 8080: GET / answers
#                           "vmkit guest <hostname>", /cgi-bin/client
#                           "client <the caller's address>" and
#                           /cgi-bin/fetch?<url> the body of <url>
#                           fetched from the guest (egress tests);
#                           /cgi-bin/disk?vdb=TEXT writes the line TEXT at
#                           the start of the disk /dev/vdb and
#                           /cgi-bin/disk?vdb reads it back (persistent
#                           storage and hotplug tests; virtio_blk, virtio_scsi
#                           and sd_mod are loaded);
#                           /cgi-bin/disksize?vdb the size of /dev/vdb in
#                           bytes (disk expansion tests);
#                           /cgi-bin/meminfo the guest's MemTotal line
#                           (memory hotplug: virtio_mem is loaded and
#                           plugged memory comes online); then a shell
#                           on the serial console (prompt "vmkit-guest# ",
#                           restarted when it exits) for console tests
#   disk.img                a raw disk (one FAT file system, no partition
#                           table) with vmlinuz and the agent initramfs that
#                           boots with BIOS (SYSLINUX in its boot sector) and
#                           with UEFI, secure boot on or off (Debian's signed
#                           shim and GRUB at \EFI\BOOT\BOOTX64.EFI), for
#                           containerDisk VMs without kernelBoot
# Boot with: console=ttyS0 panic=-1 quiet, machine pc, <acpi/>.
#
# usage: hack/make-guest.sh [outdir]   (default: _output/guest in the repo)
# Idempotent: does nothing when all outputs exist. Needs root (mknod).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/_output/guest}
KERNEL_META=${KERNEL_META:-linux-image-amd64}
OUTPUTS=(vmlinuz vmlinux initramfs.cpio.gz initramfs-idle.cpio.gz initramfs-agent.cpio.gz disk.img)
# Bump when the guest changes: a guest built by an older script is rebuilt.
GUEST_VERSION=18
# The bootloaders (BIOS: SYSLINUX; UEFI: Debian's signed shim and GRUB) and
# the tools that make the FAT disk without mounting it.
DISK_PKGS=(syslinux syslinux-common shim-signed grub-efi-amd64-signed mtools dosfstools)
# The guest agent and the libraries it may load come from these packages.
AGENT_PKGS=(qemu-guest-agent libc6 libgcc-s1 libglib2.0-0 libnuma1 libudev1 liburing2
  libffi8 libmount1 libblkid1 libpcre2-8-0 libselinux1 zlib1g)
# IPv6: busybox has no DHCPv6 client; dhcpcd (libc only) takes the address
# by DHCPv6 and the default route from router advertisements, as a
# distribution's guest does.
AGENT_PKGS+=(dhcpcd-base)

log() { echo "make-guest: $*"; }
die() { echo "make-guest: $*" >&2; exit 1; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

complete=true
for f in "${OUTPUTS[@]}"; do [ -s "$OUT/$f" ] || complete=false; done
[ "$(cat "$OUT/guest.version" 2>/dev/null)" = "$GUEST_VERSION" ] || complete=false
if $complete; then
  log "guest already built in $OUT"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (mknod /dev/console in the initramfs)"
for tool in apt-get apt-cache dpkg-deb xz gzip readelf; do
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
log "downloading $kpkg, busybox-static, the guest agent and SYSLINUX"
apt-get "${apt_opts[@]}" download "$kpkg" busybox-static "${AGENT_PKGS[@]}" "${DISK_PKGS[@]}" >/dev/null

# --- kernel -------------------------------------------------------------------
dpkg-deb --fsys-tarfile "${kpkg}"_*.deb | tar -x ./boot/ ./lib/modules/
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

# make_initramfs NAME LAST-COMMAND [ADD-FUNCTION]
# ADD-FUNCTION, when given, is called with the root directory to add files.
make_initramfs() {
  local name=$1 last=$2 root=$work/root-$1
  mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys"
  cp "$bb" "$root/bin/busybox"
  if [ $# -ge 3 ]; then "$3" "$root"; fi
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

# --- guest agent ----------------------------------------------------------------
for deb in "${AGENT_PKGS[@]}"; do dpkg-deb -x "${deb}"_*.deb agent-pkg; done
qga=$work/agent-pkg/usr/sbin/qemu-ga
[ -x "$qga" ] || die "no qemu-ga in qemu-guest-agent"
kver=$(cd lib/modules && ls)
[ -n "$kver" ] && [ -d "lib/modules/$kver/kernel" ] || die "no modules in $kpkg"

# find_lib SONAME: the library's path in the extracted packages.
find_lib() {
  local d
  for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64 lib usr/lib; do
    if [ -e "$work/agent-pkg/$d/$1" ]; then echo "$d/$1"; return; fi
  done
  die "library $1 (needed by qemu-ga) is in none of: ${AGENT_PKGS[*]}"
}

# needed_libs ELF...: the ELF files' NEEDED entries, transitively, as paths
# relative to the extracted packages.
needed_libs() {
  local -A seen=()
  local queue=("$@") f lib path
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -n "${seen[$lib]:-}" ] && continue
      path=$(find_lib "$lib")
      seen[$lib]=$path
      echo "$path"
      queue+=("$work/agent-pkg/$path")
    done
  done
}

# find_module NAME: the module's path relative to the extracted kernel.
find_module() {
  local m
  m=$(find "lib/modules/$kver/kernel" \( -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" \) | head -n 1)
  [ -n "$m" ] || die "kernel module $1 not found in $kpkg (built in? then drop it here)"
  case $m in *.ko) ;; *) die "kernel module $m is compressed: busybox insmod needs it uncompressed" ;; esac
  echo "$m"
}

# module_order NAME...: the modules with their dependencies (from .modinfo),
# dependencies first.
module_order() {
  local -A done_=()
  visit() {
    local m=$1 dep path
    [ -n "${done_[$m]:-}" ] && return
    done_[$m]=1
    path=$(find_module "$m")
    for dep in $(readelf -p .modinfo "$path" | sed -n 's/.*depends=//p' | tr ',' ' '); do
      visit "$dep"
    done
    echo "$path"
  }
  local m
  for m in "$@"; do visit "$m"; done
}

# add_agent ROOT: qemu-ga, its libraries and loader, the virtio modules and
# /bin/start-agent.
add_agent() {
  local root=$1 lib loader m libs mods
  mkdir -p "$root/usr/sbin" "$root/lib64" "$root/etc" "$root/run" "$root/tmp" "$root/var" "$root/modules"
  ln -s ../run "$root/var/run"
  cp "$qga" "$root/usr/sbin/qemu-ga"
  cp "$work/agent-pkg/usr/sbin/dhcpcd" "$root/usr/sbin/dhcpcd"
  # No user dhcpcd: dhcpcd then runs in one process, without privilege
  # separation (which, in this initramfs, segfaults or hangs). nodev: there
  # is no udev, whose "device ready" events dhcpcd would otherwise wait for.
  mkdir -p "$root/var/lib/dhcpcd"
  echo nodev >"$root/etc/dhcpcd.conf"
  loader=$(readelf -l "$qga" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  [ -n "$loader" ] || die "qemu-ga has no program interpreter"
  libs=$(needed_libs "$qga" "$work/agent-pkg/usr/sbin/dhcpcd") # separate assignments: a failure stops the script
  mods=$(module_order virtio_pci virtio_console virtio_net virtio_blk virtio_mem virtio_scsi sd_mod)
  for lib in $libs "lib/x86_64-linux-gnu/$(basename "$loader")"; do
    mkdir -p "$root/$(dirname "$lib")"
    cp -L "$work/agent-pkg/$lib" "$root/$lib"
  done
  # The loader is looked up at its absolute path (/lib64/ld-linux-x86-64.so.2).
  [ -e "$root$loader" ] || ln -s "/lib/x86_64-linux-gnu/$(basename "$loader")" "$root$loader"
  local insmods=
  for m in $mods; do
    cp "$m" "$root/modules/"
    insmods+="insmod /modules/$(basename "$m")"$'\n'
  done
  cat >"$root/etc/os-release" <<'EOF'
NAME="vmkit test guest"
ID=vmkit-test-guest
ID_LIKE=debian
PRETTY_NAME="vmkit test guest (busybox, Debian kernel)"
VERSION="1"
VERSION_ID="1"
EOF
  # qemu-ga's guest-shutdown runs "shutdown -r|-h|-H|-P +0 message"
  # (virt-api's softreboot asks for -r): busybox has reboot and poweroff.
  mkdir -p "$root/sbin"
  cat >"$root/sbin/shutdown" <<'EOF'
#!/bin/busybox sh
for a; do [ "$a" = -r ] && exec /bin/busybox reboot -f; done
exec /bin/busybox poweroff -f
EOF
  chmod 755 "$root/sbin/shutdown"
  # udhcpc calls this with the lease in its environment.
  cat >"$root/bin/dhcp-event" <<'EOF'
#!/bin/busybox sh
case $1 in bound|renew)
  ip addr flush dev "$interface"
  ip addr add "$ip/${mask:-24}" dev "$interface"
  [ -n "$mtu" ] && ip link set dev "$interface" mtu "$mtu"
  # A new lease after a live migration may name another router.
  [ -n "$router" ] && ip route del default dev "$interface" 2>/dev/null
  [ -n "$router" ] && ip route add default via "${router%% *}" dev "$interface"
  [ -n "$hostname" ] && hostname "$hostname"
  # A secondary network's lease may have no name servers: keep eth0's.
  if [ -n "$dns" ]; then
    : >/etc/resolv.conf
    for d in $dns; do echo "nameserver $d" >>/etc/resolv.conf; done
    [ -n "$search" ] && echo "search $search" >>/etc/resolv.conf
  fi
  echo "vmkit guest $(hostname)" >/www/index.html
  echo "GUEST-DHCP-BOUND dev=$interface ip=$ip router=$router hostname=$(hostname)" >/dev/console ;;
esac
EOF
  # dhcpcd calls this once it has configured an IPv6 address (it sets the
  # address and the routes itself).
  cat >"$root/bin/dhcp6-event" <<'EOF'
#!/bin/busybox sh
case $reason in BOUND6|REBOOT6)
  echo "GUEST-DHCP6-BOUND dev=$interface ip=$new_dhcp6_ia_na1_ia_addr1" >/dev/console ;;
esac
EOF
  chmod 755 "$root/bin/dhcp6-event"
  cat >"$root/bin/start-agent" <<EOF
#!/bin/busybox sh
# Started by /init after GUEST-BOOTED: virtio modules, /dev, eth0, the agent.
/bin/busybox --install -s /bin
export PATH=/bin:/usr/sbin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
hostname vmkit-guest
# Memory that virtio-mem plugs (memory hotplug) comes online by itself.
echo online >/sys/devices/system/memory/auto_online_blocks 2>/dev/null
${insmods}# The network first (it answers sooner), then the agent's port.
ip link set lo up
echo "vmkit guest \$(hostname)" >/www/index.html
httpd -p 80 -h /www
httpd -p 8080 -h /www
# A NIC whose carrier went and came back asks for a lease again, as
# systemd-networkd does: a live-migrated passt guest's link is taken down
# and up (#39), and the pod's address is the target pod's.
watch_link() {
  # Counted from the carrier's first coming up: the boot's is not a change.
  until read -r up <"/sys/class/net/\$1/carrier" 2>/dev/null && [ "\$up" = 1 ]; do sleep 1; done
  read -r seen <"/sys/class/net/\$1/carrier_changes" || return
  while sleep 1; do
    read -r now <"/sys/class/net/\$1/carrier_changes" || return
    [ "\$now" = "\$seen" ] && continue
    read -r up <"/sys/class/net/\$1/carrier" 2>/dev/null || up=0
    [ "\$up" = 1 ] || continue
    seen=\$now
    udhcpc -i "\$1" -s /bin/dhcp-event -t 5 -T 1 -A 5 -n -q >/dev/null 2>&1
  done
}
# Every NIC asks for a lease: eth0 on the pod network, the others on
# secondary networks (where none may answer: a layer-2 network).
for dev in /sys/class/net/eth*; do
  dev=\${dev##*/}
  [ -e "/sys/class/net/\$dev" ] || continue
  if ip link set "\$dev" up 2>/dev/null; then
    udhcpc -i "\$dev" -s /bin/dhcp-event -t 5 -T 1 -A 5 -b -q >/dev/null 2>&1 &
    watch_link "\$dev" &
  fi
done
# IPv6 where a router advertises it (masquerade or bridge on a dual-stack pod).
dhcpcd -6 -b -q -c /bin/dhcp6-event >/dev/null 2>&1
port=
for i in 1 2 3 4 5 6 7 8 9 10; do
  for f in /sys/class/virtio-ports/*/name; do
    [ "\$(cat "\$f" 2>/dev/null)" = org.qemu.guest_agent.0 ] && port=\$(basename "\$(dirname "\$f")")
  done
  [ -n "\$port" ] && break
  sleep 0.2
done
if [ -z "\$port" ]; then
  echo "GUEST-AGENT-NO-PORT"
else
  [ -e "/dev/\$port" ] || mknod "/dev/\$port" c \$(tr ':' ' ' <"/sys/class/virtio-ports/\$port/dev")
  mkdir -p /dev/virtio-ports
  ln -sf "../\$port" /dev/virtio-ports/org.qemu.guest_agent.0
  qemu-ga -m virtio-serial -p /dev/virtio-ports/org.qemu.guest_agent.0 -t /run -f /run/qemu-ga.pid &
  echo "GUEST-AGENT-STARTED"
fi
EOF
  mkdir -p "$root/www/cgi-bin"
  cat >"$root/www/cgi-bin/client" <<'EOF'
#!/bin/busybox sh
# httpd reports IPv4 callers as [::ffff:a.b.c.d]
a=${REMOTE_ADDR#\[}; a=${a%\]}; a=${a#::ffff:}
printf 'Content-Type: text/plain\r\n\r\nclient %s\n' "$a"
EOF
  cat >"$root/www/cgi-bin/fetch" <<'EOF'
#!/bin/busybox sh
printf 'Content-Type: text/plain\r\n\r\n'
# (not wget -T: Debian's static busybox 1.35 wget crashes with it)
/bin/busybox timeout 10 /bin/busybox wget -q -O - "$QUERY_STRING" 2>&1 || echo "fetch $QUERY_STRING failed"
EOF
  cat >"$root/www/cgi-bin/meminfo" <<'EOF'
#!/bin/busybox sh
printf 'Content-Type: text/plain\r\n\r\n'
grep MemTotal /proc/meminfo
EOF
  cat >"$root/www/cgi-bin/disksize" <<'EOF'
#!/bin/busybox sh
# ?DEV prints the size of the disk /dev/DEV in bytes, as the guest sees it.
printf 'Content-Type: text/plain\r\n\r\n'
dev=$QUERY_STRING
case $dev in ''|*[!a-z0-9]*) echo "bad device name '$dev'"; exit 0 ;; esac
[ -r "/sys/block/$dev/size" ] || { echo "no disk /dev/$dev"; exit 0; }
echo $(( $(cat "/sys/block/$dev/size") * 512 ))
EOF
  cat >"$root/www/cgi-bin/disk" <<'EOF'
#!/bin/busybox sh
# ?DEV=TEXT writes the line TEXT (letters, digits, . _ -) into the first
# sector of the disk /dev/DEV and flushes it; ?DEV prints that line.
printf 'Content-Type: text/plain\r\n\r\n'
dev=${QUERY_STRING%%=*}
case $dev in ''|*[!a-z0-9]*) echo "bad device name '$dev'"; exit 0 ;; esac
[ -b "/dev/$dev" ] || { echo "no disk /dev/$dev"; exit 0; }
case $QUERY_STRING in
*=*)
  text=${QUERY_STRING#*=}
  case $text in ''|*[!A-Za-z0-9._-]*) echo "bad text '$text'"; exit 0 ;; esac
  if printf '%s\n' "$text" | dd of="/dev/$dev" bs=512 count=1 conv=sync,notrunc,fsync 2>/dev/null; then
    echo "wrote $text to /dev/$dev"
  else
    echo "writing /dev/$dev failed"
  fi ;;
*) dd if="/dev/$dev" bs=512 count=1 2>/dev/null | tr -d '\000' | head -n 1 ;;
esac
EOF
  chmod 755 "$root/bin/start-agent" "$root/bin/dhcp-event" "$root/www/cgi-bin/client" "$root/www/cgi-bin/fetch" "$root/www/cgi-bin/disk" "$root/www/cgi-bin/disksize" "$root/www/cgi-bin/meminfo"
}
# The shell on the console: cttyhack makes the serial port its controlling
# terminal (so ^C reaches it), setsid a session of its own.
make_initramfs initramfs-agent '/bin/busybox sh /bin/start-agent
export PATH=/bin:/usr/sbin PS1="vmkit-guest# "
while :; do /bin/busybox setsid /bin/busybox cttyhack /bin/busybox sh; /bin/busybox sleep 1; done' add_agent

# --- disk -----------------------------------------------------------------------
# One FAT file system on the whole disk (no partition table): SYSLINUX in its
# boot sector for SeaBIOS, and \EFI\BOOT\BOOTX64.EFI (shim, signed by
# Microsoft's UEFI CA, which loads Debian's signed GRUB next to it, which
# loads Debian's signed kernel) for OVMF, with or without secure boot. mtools
# writes into the image file, so nothing is mounted.
for deb in "${DISK_PKGS[@]}"; do dpkg-deb -x "${deb}"_*.deb disk-pkg; done
PATH=$work/disk-pkg/usr/bin:$work/disk-pkg/sbin:$PATH
export MTOOLS_SKIP_CHECK=1
cmdline="console=ttyS0 panic=-1 quiet mitigations=off cryptomgr.notests tsc=reliable no_timer_check"
truncate -s 24M disk.img
mkfs.fat -n VMKIT disk.img >/dev/null
cat >syslinux.cfg <<EOF
SERIAL 0 115200
DEFAULT vmkit
PROMPT 0
TIMEOUT 0
LABEL vmkit
  KERNEL vmlinuz
  INITRD initrd.gz
  APPEND $cmdline
EOF
cat >grub.cfg <<EOF
set timeout=0
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
menuentry vmkit {
  linux /vmlinuz $cmdline
  initrd /initrd.gz
}
EOF
mcopy -i disk.img vmlinuz ::vmlinuz
mcopy -i disk.img initramfs-agent.cpio.gz ::initrd.gz
mcopy -i disk.img syslinux.cfg ::syslinux.cfg
syslinux --install disk.img
mmd -i disk.img ::EFI ::EFI/BOOT ::EFI/debian
mcopy -i disk.img disk-pkg/usr/lib/shim/shimx64.efi.signed ::EFI/BOOT/BOOTX64.EFI
mcopy -i disk.img disk-pkg/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed ::EFI/BOOT/grubx64.efi
# Debian's signed GRUB reads \EFI\debian\grub.cfg.
mcopy -i disk.img grub.cfg ::EFI/debian/grub.cfg

# Move complete files into place last, so an interrupted run never leaves a
# set of outputs that looks finished.
for f in "${OUTPUTS[@]}"; do mv -f "$f" "$OUT/$f"; done
echo "$GUEST_VERSION" >"$OUT/guest.version"
log "built from $kpkg in $OUT:"
ls -l "${OUTPUTS[@]/#/$OUT/}"
