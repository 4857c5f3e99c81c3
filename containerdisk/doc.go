// Package containerdisk makes KubeVirt container disks: OCI images that
// carry one virtual machine disk image, which a VirtualMachine boots with
// spec.template.spec.volumes[].containerDisk.image.
//
// # What the image holds
//
// One layer with the disk file at /disk/<name>, KubeVirt's container-disk
// layout, the one its documented Dockerfile makes
//
//	FROM scratch
//	ADD --chown=107:107 disk.qcow2 /disk/
//
// The directory /disk is owned by 107:107 (the qemu user of the launcher
// pod's helper containers) with mode 0555, the file by 107:107 with mode
// 0440. The image has an OCI manifest and configuration, os linux, the
// architecture asked for (amd64, arm64 or s390x), and no entrypoint:
// vmkit's and KubeVirt's launcher pods run their own container-disk
// binary in it.
//
// # Checks
//
// Inspect accepts a regular, non-empty file, qcow2 (by its magic,
// "QFI\xfb") or else raw. A qcow2 image naming a backing file or an
// external data file is refused (ErrReferencesFile), as vmkit's launcher
// refuses it, with the name of the backing file; so are qcow2 versions
// other than 2 and 3 and truncated headers.
//
// # Reproducible and streamed
//
// The same file, name, architecture and time give the same digests: the
// tar entries carry one time (Options.Created: SOURCE_DATE_EPOCH through
// SourceDateEpoch, else the Unix epoch) and no user or group names, and
// the gzip stream has no name or time and a fixed level (Go's
// compress/gzip, so a vmctl built with another Go release may compress,
// and so digest, differently). The file is never held in memory: Image
// reads it once to compute the layer's digests, and the layer reads it
// again each time it is uploaded or written. A file changed in between is
// an error, not a layer that fails its digest.
//
// Push the image with go-containerregistry's remote.Write, or write it
// with WriteArchive as a tar that containerd, Docker and Podman load with
// the same manifest digest; vmctl's "containerdisk push" and
// "containerdisk build" do.
//
// # In the pod
//
// The other end of a container disk is package containerdisk/sidecar:
// what the container-disk sidecar of a launcher pod (cmd/container-disk,
// running in the image) does to hand the disk, or a kernel-boot image's
// /boot, to the launcher, by copying it to a volume they share. It is a
// package of its own because that binary is static and small: it uses the
// standard library only, not go-containerregistry.
//
// The package is pure Go (no cgo).
package containerdisk
