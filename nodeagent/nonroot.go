package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/nodeagent/internal/procfs"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// launcherDevices are the devices a launcher's QEMU opens, as the device
// plugins put them in the launcher's /dev (with the node's owner and mode:
// /dev/net/tun is often root's alone). A non-root launcher gets them
// chowned, as KubeVirt's virt-handler does; a device the pod did not
// request is not there and is skipped.
var launcherDevices = []string{"dev/kvm", "dev/net/tun", "dev/vhost-net"}

// prepareNonRootLauncher gives a launcher that runs as a user other than
// root (the default launcher pod runs as the qemu user 107) what its QEMU
// must open but cannot be given by the pod's security context, as
// KubeVirt's virt-handler does for non-root VMIs: the devices of
// launcherDevices, the block devices of Block claims (/dev/<volume>, which
// the container runtime creates with the node's owner), and each host
// disk's image (prepareHostDisk). Everything is reached through rootDir,
// the launcher's root (/proc/<pid>/root), resolved inside it without
// following symbolic links, and only the launcher container's own nodes
// change owner, except host disk images, which are the node's files; no
// directory ever changes owner. A root launcher needs nothing.
func prepareNonRootLauncher(vmi *v1.VirtualMachineInstance, rootDir string, uid, gid int) error {
	if uid == 0 {
		return nil
	}
	root, err := unix.Open(rootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the launcher's root file system: %w", err)
	}
	defer unix.Close(root)
	for _, dev := range launcherDevices {
		if _, err := chownIn(root, dev, uid, gid, unix.S_IFCHR); err != nil {
			return err
		}
	}
	for i, vol := range vmi.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim != nil, vol.DataVolume != nil, vol.Ephemeral != nil:
			// A Filesystem claim has no /dev/<volume>; only a block
			// device there is the claim's.
			if _, err := chownIn(root, filepath.Join("dev", vol.Name), uid, gid, unix.S_IFBLK); err != nil {
				return fmt.Errorf("spec.volumes[%d] (%s): %w", i, vol.Name, err)
			}
		case vol.HostDisk != nil:
			if err := prepareHostDisk(root, &vol, uid, gid); err != nil {
				return fmt.Errorf("spec.volumes[%d] (%s): %w", i, vol.Name, err)
			}
		}
	}
	return nil
}

// prepareHostDisk gives the launcher's user the image of a hostDisk volume,
// in the node directory the launcher pod mounts at
// <hostDisksDir>/<volume>: an image that is there, a regular file with no
// other name (a hard link could be any file of the node's file system),
// changes owner; a DiskOrCreate image that is not there is created by the
// agent, sparse, of hostDisk.capacity bytes, mode 0660, owned by the
// launcher's user, so the launcher finds it and keeps it. The directory,
// which is the node's, keeps its owner: giving it away (the VMI's creator
// could then plant any file there, in /etc with a path of /etc/x.img) is
// what #35's N8 was.
func prepareHostDisk(root int, vol *v1.Volume, uid, gid int) error {
	hd := vol.HostDisk
	name := filepath.Base(hd.Path)
	if name == "/" || name == "." || name == ".." {
		return fmt.Errorf("hostDisk.path %q does not end in a file name", hd.Path)
	}
	dir := filepath.Join(strings.TrimPrefix(hostDisksDir, "/"), vol.Name)
	img := filepath.Join(dir, name)
	found, err := chownIn(root, img, uid, gid, unix.S_IFREG)
	if err != nil || found || hd.Type != v1.HostDiskExistsOrCreateEmpty {
		return err
	}
	size := hd.Capacity.Value()
	if size <= 0 {
		return fmt.Errorf("hostDisk.capacity %s: must be positive for type DiskOrCreate", hd.Capacity.String())
	}
	dfd, err := unix.Openat2(root, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil // not mounted: the launcher says so
	}
	if err != nil {
		return fmt.Errorf("opening /%s in the launcher: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		// Something else than a regular file (chownIn left it), or an
		// image created meanwhile: the launcher checks it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the image /%s in the launcher: %w", img, err)
	}
	err = errors.Join(unix.Fchown(fd, uid, gid), unix.Fchmod(fd, 0o660), unix.Ftruncate(fd, size))
	err = errors.Join(err, unix.Close(fd))
	if err != nil {
		_ = unix.Unlinkat(dfd, name, 0)
		return fmt.Errorf("creating the image /%s in the launcher, %d bytes owned by %d:%d: %w", img, size, uid, gid, err)
	}
	return nil
}

// hostDisksDir is where the launcher pod mounts host disks' directories
// (podtemplate's, and nodeagent/launcher's).
const hostDisksDir = "/var/run/kubevirt-private/vmi-disks"

// chownIn changes the owner of path, relative to and resolved inside the
// directory root, to uid:gid, when it is a file of type typ (unix.S_IFBLK,
// …). It reports whether it found one: a missing path, or one of another
// type, is left alone; a symbolic link anywhere in path, or a regular file
// with more than one name, is an error.
func chownIn(root int, path string, uid, gid int, typ uint32) (bool, error) {
	fd, err := unix.Openat2(root, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening /%s in the launcher: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("/%s in the launcher: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return false, fmt.Errorf("/%s in the launcher is a symbolic link; it must be the file itself", path)
	case st.Mode&unix.S_IFMT != typ:
		return false, nil
	case typ == unix.S_IFREG && st.Nlink > 1:
		return false, fmt.Errorf("/%s in the launcher has %d names (hard links); giving it away would give away the others", path, st.Nlink)
	}
	if int(st.Uid) == uid && int(st.Gid) == gid {
		return true, nil
	}
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return false, fmt.Errorf("giving /%s in the launcher to %d:%d: %w", path, uid, gid, err)
	}
	return true, nil
}

// prepareLauncher runs prepareNonRootLauncher for the launcher behind c, a
// step before each start of its domain. A launcher in a PID namespace the
// agent cannot see is left alone (wiring its network fails with an error
// that says so).
func (a *Agent) prepareLauncher(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) error {
	pid, err := c.PID(ctx)
	if err != nil {
		return fmt.Errorf("finding the launcher process: %w", err)
	}
	if pid <= 0 {
		return nil
	}
	uid, gid, err := procfs.User(pid)
	if err != nil {
		return fmt.Errorf("the launcher's user: %w", err)
	}
	return prepareNonRootLauncher(vmi, filepath.Join("/proc", strconv.Itoa(pid), "root"), uid, gid)
}
