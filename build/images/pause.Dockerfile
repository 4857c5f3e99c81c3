# syntax=docker/dockerfile:1.7
# registry.k8s.io/pause:3.10 as hack/build-images.sh builds it without Docker
# (hack/images, see docs/images.md), for users with Docker. The context is
# the hack/images module:
#
#   docker build -f build/images/pause.Dockerfile -t registry.k8s.io/pause:3.10 hack/images
#
# hack/images/dockerfile_test.go keeps the files and settings below equal to
# the tool's.
ARG GO_IMAGE=golang:1.25-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /out/pause ./pause

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

FROM scratch AS pause
COPY --from=base /rootfs/ /
COPY --from=build /out/pause /pause
ENV PATH=/usr/bin:/bin
USER 65535:65535
ENTRYPOINT ["/pause"]
