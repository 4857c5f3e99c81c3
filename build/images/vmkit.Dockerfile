# syntax=docker/dockerfile:1.7
# vmkit's images as hack/build-images.sh builds them without Docker
# (hack/images, see docs/images.md), for users with Docker: one target per
# image, the repository as the context.
#
#   docker build -f build/images/vmkit.Dockerfile --target virt-operator   -t vmkit/virt-operator:devel .
#   docker build -f build/images/vmkit.Dockerfile --target virt-controller -t vmkit/virt-controller:devel .
#   docker build -f build/images/vmkit.Dockerfile --target virt-api        -t vmkit/virt-api:devel .
#   docker build -f build/images/vmkit.Dockerfile --target virt-handler    -t vmkit/virt-handler:devel .
#   docker build -f build/images/vmkit.Dockerfile --target virt-exportserver -t vmkit/virt-exportserver:devel .
#   docker build -f build/images/vmkit.Dockerfile --target virt-launcher   -t vmkit/virt-launcher:devel .
#   hack/make-guest.sh _output/guest
#   docker build -f build/images/vmkit.Dockerfile --target tiny-guest -t vmkit/tiny-guest:devel -t vmkit/tiny-guest:latest .
#   hack/make-cloud-guest.sh _output/cloud-guest
#   docker build -f build/images/vmkit.Dockerfile --target cloud-guest -t vmkit/cloud-guest:devel -t vmkit/cloud-guest:latest .
#
# The launcher installs the same Debian packages with apt-get (maintainer
# scripts run, so the file system is not byte for byte the tool's); the
# other images are the tool's files in the same layers. vmkit.Dockerfile.dockerignore
# keeps _output (but the guests) out of the context.
# hack/images/dockerfile_test.go keeps the files and settings below equal to
# the tool's.
ARG GO_IMAGE=golang:1.25-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

# --- binaries -----------------------------------------------------------------
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /out/ \
      ./cmd/virt-operator ./cmd/virt-controller ./cmd/virt-api ./cmd/virt-handler ./cmd/virt-exportserver ./cmd/container-disk

FROM build AS build-launcher
# virt-launcher links libvirt through cgo.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libvirt-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
RUN CGO_ENABLED=1 go build -trimpath -buildvcs=false -o /out/ ./cmd/virt-launcher

# --- accounts and /tmp of every image but the launcher ------------------------------
FROM ${DEBIAN_IMAGE} AS base
RUN mkdir -p /rootfs/etc /rootfs/tmp /rootfs/var/tmp /rootfs/root \
 && chmod 1777 /rootfs/tmp /rootfs/var/tmp && chmod 700 /rootfs/root
COPY <<EOF /rootfs/etc/passwd
root:x:0:0:root:/root:/usr/sbin/nologin
qemu:x:107:107:qemu:/:/usr/sbin/nologin
vmkit:x:1001:1001:vmkit:/:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
COPY <<EOF /rootfs/etc/group
root:x:0:
qemu:x:107:
vmkit:x:1001:
nogroup:x:65534:
EOF

# --- components: a static binary at /usr/bin/<name> ---------------------------------
# virt-operator, virt-controller and virt-api run with runAsNonRoot: a numeric user.
FROM scratch AS virt-operator
COPY --from=base /rootfs/ /
COPY --from=build /out/virt-operator /usr/bin/virt-operator
ENV PATH=/usr/bin:/bin
USER 1001
ENTRYPOINT ["/usr/bin/virt-operator"]

FROM scratch AS virt-controller
COPY --from=base /rootfs/ /
COPY --from=build /out/virt-controller /usr/bin/virt-controller
ENV PATH=/usr/bin:/bin
USER 1001
ENTRYPOINT ["/usr/bin/virt-controller"]

FROM scratch AS virt-api
COPY --from=base /rootfs/ /
COPY --from=build /out/virt-api /usr/bin/virt-api
ENV PATH=/usr/bin:/bin
USER 1001
ENTRYPOINT ["/usr/bin/virt-api"]

# virt-handler runs privileged, as root.
FROM scratch AS virt-handler
COPY --from=base /rootfs/ /
COPY --from=build /out/virt-handler /usr/bin/virt-handler
ENV PATH=/usr/bin:/bin
USER 0
ENTRYPOINT ["/usr/bin/virt-handler"]

# The VirtualMachineExport server; its pods run as the qemu user 107.
FROM scratch AS virt-exportserver
COPY --from=base /rootfs/ /
COPY --from=build /out/virt-exportserver /usr/bin/virt-exportserver
ENV PATH=/usr/bin:/bin
USER 1001
ENTRYPOINT ["/usr/bin/virt-exportserver"]

# --- the launcher: libvirt + QEMU from Debian, without systemd, as the qemu user 107 ---
FROM ${DEBIAN_IMAGE} AS virt-launcher
# libvirt-daemon-system is deliberately absent: it pulls in systemd.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libvirt-daemon libvirt-daemon-driver-qemu qemu-system-x86 qemu-utils coreutils libc-bin dash ovmf xorriso swtpm swtpm-tools passt \
 && rm -rf /var/lib/apt/lists/* \
 && rm -f /usr/bin/qemu-system-i386 /usr/bin/qemu-system-x86_64-microvm
# (libvirtd probes every qemu-system-<arch> at start: one binary, one probe.)
# libvirt looks up its compiled-in QEMU user at start; 107 is also the user
# the launcher pod runs as (root only with the Root feature gate).
RUN (getent group kvm || groupadd -g 36 kvm) \
 && (getent group libvirt-qemu || groupadd -g 107 libvirt-qemu) \
 && (getent group libvirt || groupadd -g 108 libvirt) \
 && (getent passwd libvirt-qemu || useradd -u 107 -g libvirt-qemu -G kvm -d /var/lib/libvirt -M -s /usr/sbin/nologin libvirt-qemu) \
 && mkdir -p /run/libvirt/qemu /run/lock /var/cache/libvirt/qemu /var/lib/libvirt/qemu/nvram /var/lib/libvirt/images \
      /var/log/libvirt/qemu /etc/libvirt/qemu \
 && chmod 1777 /run/lock /var/lib/libvirt/qemu/nvram && chmod 711 /var/cache/libvirt /var/lib/libvirt/images && chmod 750 /var/cache/libvirt/qemu \
 && chmod 751 /var/lib/libvirt/qemu /var/log/libvirt/qemu && chmod 700 /var/log/libvirt
COPY --chmod=600 <<EOF /etc/libvirt/qemu.conf
# Written by vmkit's hack/images for the virt-launcher container.
# QEMU runs as root inside the container; no file ownership changes.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
# The container runtime owns the cgroups and namespaces.
cgroup_controllers = [ ]
namespaces = [ ]
security_driver = "none"
# Guest serial and QEMU output go through virtlogd (started by virt-launcher).
stdio_handler = "logd"
# swtpm (a guest's TPM) runs as root too: the image has no tss user.
swtpm_user = "root"
swtpm_group = "root"
EOF
COPY <<EOF /etc/libvirt/libvirtd.conf
# Written by vmkit's hack/images for the virt-launcher container.
listen_tls = 0
listen_tcp = 0
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
# Warnings and errors on stderr, which virt-launcher passes on.
log_outputs = "3:stderr"
EOF
COPY <<EOF /etc/libvirt/virtlogd.conf
# Written by vmkit's hack/images for the virt-launcher container.
log_outputs = "3:stderr"
EOF
COPY --from=build-launcher /out/virt-launcher /usr/bin/virt-launcher
COPY --from=build /out/container-disk /usr/bin/container-disk
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 0
ENTRYPOINT ["/usr/bin/virt-launcher"]

# --- the test guest for kernel boot and as a container disk (hack/make-guest.sh _output/guest)
FROM scratch AS tiny-guest
COPY --from=base /rootfs/ /
COPY --chmod=644 _output/guest/vmlinux _output/guest/initramfs-idle.cpio.gz _output/guest/initramfs-agent.cpio.gz /boot/
COPY --chmod=644 _output/guest/disk.img /disk/tiny.img
ENV PATH=/usr/bin:/bin

# --- the cloud guest, a container disk (hack/make-cloud-guest.sh _output/cloud-guest)
FROM scratch AS cloud-guest
COPY --from=base /rootfs/ /
COPY --chmod=644 _output/cloud-guest/debian-12-cloud.qcow2 /disk/debian-12-cloud.qcow2
ENV PATH=/usr/bin:/bin
