// Package mountns bind-mounts a path of one mount namespace into another:
// how the node agent gives a running launcher a hotplugged claim, straight
// into the launcher container's mount namespace, without an attachment pod
// and without a mount on the node that would outlive the pod.
//
// The work happens on an OS thread of its own: it leaves the process's
// shared file-system attributes (unshare CLONE_FS), enters the source's
// mount namespace to clone the mount (open_tree), enters the target's to
// attach it (move_mount), and is never returned to the Go scheduler, so
// no other goroutine runs in a namespace it did not ask for. Both need
// CAP_SYS_ADMIN (a privileged node agent, as KubeVirt's virt-handler is).
package mountns

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Path is the mount namespace of a process, as /proc shows it to the
// caller.
func Path(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/mnt" }

// Outside is the mount namespace the process was started from: that of its
// first ancestor in another mount namespace than its own (for a node agent
// in a container, the container runtime's shim, in the node's namespace,
// which /proc/1 may not be to the agent: a node whose init is not root's
// to inspect, or a test node whose runtime runs in a namespace of its
// own), or its own when no ancestor is in another one (an agent running
// on the node itself).
func Outside() (string, error) {
	self, err := os.Readlink(Path(os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("reading the process's mount namespace: %w", err)
	}
	for pid := os.Getppid(); pid > 0; {
		ns, err := os.Readlink(Path(pid))
		if err != nil {
			break // an ancestor we may not inspect: stop at the last one
		}
		if ns != self {
			return Path(pid), nil
		}
		if pid, err = parentOf(pid); err != nil {
			break
		}
	}
	return Path(os.Getpid()), nil
}

// parentOf is the parent of process pid, from /proc/<pid>/stat.
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: no parent", pid)
	}
	return strconv.Atoi(f[1])
}

// Bind mounts src, a directory or file as the mount namespace at fromNS
// sees it, at dst inside the mount namespace at toNS (namespace paths such
// as Outside(), the node's for a node agent in a pod, and Path(launcher
// PID)). dst is created first, a directory or an empty file like src;
// dst's parent must exist. Mounting over an existing mount is refused.
func Bind(fromNS, src, toNS, dst string) error {
	var (
		fi   os.FileInfo
		tree = -1
	)
	defer func() {
		if tree >= 0 {
			unix.Close(tree)
		}
	}()
	return across(fromNS, toNS, func() error {
		var err error
		if fi, err = os.Stat(src); err != nil {
			return err
		}
		if tree, err = unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err != nil {
			return fmt.Errorf("cloning the mount of %s: %w", src, err)
		}
		return nil
	}, func() error {
		var err error
		if mounted, err := isMountPoint(dst); err != nil {
			return err
		} else if mounted {
			return fmt.Errorf("%s is a mount point already", dst)
		}
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o750)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				err = f.Close()
			}
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating the mount point %s: %w", dst, err)
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mounting %s at %s: %w", src, dst, err)
		}
		return nil
	})
}

// Device makes dst, inside the mount namespace at toNS, a block device
// node of the device src is in the mount namespace at fromNS, owned by
// uid:gid, mode 0660, and returns the device's number. An existing dst of
// the same device is kept (its owner set); anything else there is an
// error. A node, not a bind mount: the launcher's user gets its own node
// without the node's /dev entry changing owner.
func Device(fromNS, src, toNS, dst string, uid, gid int) (uint64, error) {
	var rdev uint64
	err := across(fromNS, toNS, func() error {
		var st unix.Stat_t
		if err := unix.Stat(src, &st); err != nil {
			return fmt.Errorf("stat %s: %w", src, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFBLK {
			return fmt.Errorf("%s is not a block device", src)
		}
		rdev = st.Rdev
		return nil
	}, func() error {
		err := unix.Mknod(dst, unix.S_IFBLK|0o660, int(rdev))
		if errors.Is(err, unix.EEXIST) {
			var have unix.Stat_t
			if err := unix.Lstat(dst, &have); err != nil {
				return err
			}
			if have.Mode&unix.S_IFMT != unix.S_IFBLK || have.Rdev != rdev {
				return fmt.Errorf("%s exists and is not the device %d:%d", dst, unix.Major(rdev), unix.Minor(rdev))
			}
			err = nil
		}
		if err != nil {
			return fmt.Errorf("making the device node %s: %w", dst, err)
		}
		return unix.Lchown(dst, uid, gid)
	})
	return rdev, err
}

// WriteFile writes data to the existing file path as the mount namespace
// at ns sees it (a cgroup control file of the node's, for one).
func WriteFile(ns, path string, data []byte) error {
	return inNamespace(ns, func() error {
		return os.WriteFile(path, data, 0)
	})
}

// Remove removes path, a device node made by Device, in the mount
// namespace at ns, and returns the number of the block device it was (0
// for anything else); a path that is gone is no error.
func Remove(ns, path string) (uint64, error) {
	var rdev uint64
	err := inNamespace(ns, func() error {
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); errors.Is(err, unix.ENOENT) {
			return nil
		} else if err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			rdev = st.Rdev
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return rdev, err
}

// Devices lists the block device nodes directly in dir in the mount
// namespace at ns, by base name.
func Devices(ns, dir string) ([]string, error) {
	var out []string
	err := inNamespace(ns, func() error {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
				out = append(out, e.Name())
			}
		}
		return nil
	})
	return out, err
}

// Unmount detaches the mount at dst in the mount namespace at ns (lazily:
// a process still holding a file below it keeps it until it closes it)
// and removes the mount point. A dst that is not mounted is only removed.
func Unmount(ns, dst string) error {
	return inNamespace(ns, func() error {
		if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmounting %s: %w", dst, err)
		}
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the mount point %s: %w", dst, err)
		}
		return nil
	})
}

// MountPoints lists the mount points directly below dir in the mount
// namespace of process pid, by base name, from /proc/<pid>/mountinfo
// (paths as the process sees them).
func MountPoints(pid int, dir string) ([]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescape(fields[4])
		if filepath.Dir(mp) == dir {
			out = append(out, filepath.Base(mp))
		}
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isMountPoint reports whether path is the root of a mount (statx's
// STATX_ATTR_MOUNT_ROOT; a bind mount from the same file system keeps its
// parent's device number, so that cannot tell).
func isMountPoint(path string) (bool, error) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("statx %s: %w", path, err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("statx %s: the kernel does not report mount roots (Linux 5.8 or later needed)", path)
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// across runs first in the mount namespace at fromNS, then second in the
// one at toNS, on one thread of its own (so what first opened is at hand
// in second).
func across(fromNS, toNS string, first, second func() error) error {
	return onThread(func() error {
		to, err := os.Open(toNS) // opened before leaving this namespace's /proc
		if err != nil {
			return err
		}
		defer to.Close()
		if err := enter(fromNS); err != nil {
			return err
		}
		if err := first(); err != nil {
			return err
		}
		if err := unix.Setns(int(to.Fd()), unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("entering the mount namespace %s: %w", toNS, err)
		}
		return second()
	})
}

// inNamespace runs fn on a thread of its own in the mount namespace at ns.
func inNamespace(ns string, fn func() error) error {
	return onThread(func() error {
		if err := enter(ns); err != nil {
			return err
		}
		return fn()
	})
}

// enter moves the calling thread (one of onThread's) into the mount
// namespace at ns.
func enter(ns string) error {
	f, err := os.Open(ns)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("entering the mount namespace %s: %w", ns, err)
	}
	return nil
}

// onThread runs fn on an OS thread of its own that leaves the process's
// file-system attributes first, so it may change mount namespace; the
// thread is never unlocked, and ends with fn's goroutine.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("leaving the process's file-system attributes: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
