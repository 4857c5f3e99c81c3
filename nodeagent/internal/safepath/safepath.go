// Package safepath opens files beneath a directory the node agent trusts
// without following the symbolic links that a less privileged writer may
// have planted below it: a launcher pod's sockets volume, which the pod's
// tenant can write, or a launcher's root file system (/proc/<pid>/root).
//
// The kernel resolves every path (openat2(2)), and what follows is done
// through the descriptors it returned, never through a path resolved
// again, so nothing can be swapped between a check and its use:
//
//   - OpenBeneath refuses a symbolic link at any component below the
//     trusted directory (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS);
//   - OpenInRoot and MkdirAllInRoot follow links as if the trusted
//     directory were the root, as a chroot would (RESOLVE_IN_ROOT, for a
//     launcher image whose /var/run links to /run), and refuse /proc's
//     magic links.
//
// A Dir's files are resolved beneath it without following links: Lstat,
// ReadFile (a regular file only), DialUnix (a socket only: connected
// through /proc/self/fd/<its O_PATH descriptor>), ListenUnix and Remove.
// It needs Linux 5.6 or newer.
package safepath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// beneath resolves below a directory, following no link at all.
	beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	// inRoot resolves as if the directory were the root.
	inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
)

// Dir is an open directory (an O_PATH descriptor). Close it when done;
// ProcPath names it only while it is open.
type Dir struct {
	f    *os.File
	fd   int
	name string
}

// OpenBeneath opens the directory rel below root, following no symbolic
// link below root: a link at any component of rel fails with an error
// matching syscall.ELOOP, a path leaving root (..) with syscall.EXDEV, and
// one that does not exist with os.ErrNotExist. root itself is opened as
// given: the caller trusts it, links included.
func OpenBeneath(root, rel string) (*Dir, error) {
	return openFrom(root, rel, beneath)
}

// OpenInRoot opens the directory rel as seen with root as the root
// directory: symbolic links below root are followed, but never out of it
// (an absolute link, or .., resolves inside root), and /proc's magic links
// are refused.
func OpenInRoot(root, rel string) (*Dir, error) {
	return openFrom(root, rel, inRoot)
}

// MkdirAllInRoot is OpenInRoot of rel, creating each missing directory of
// it with mode perm (before the umask), as os.MkdirAll does.
func MkdirAllInRoot(root, rel string, perm os.FileMode) (*Dir, error) {
	r, err := OpenBeneath(root, ".")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.mkdirAll(filepath.Clean("/"+rel), perm)
}

// mkdirAll opens rel (absolute: below d as its root), making it and its
// missing parents first.
func (d *Dir) mkdirAll(rel string, perm os.FileMode) (*Dir, error) {
	dir, err := d.open(rel, inRoot)
	if err == nil || !errors.Is(err, os.ErrNotExist) || rel == "/" {
		return dir, err
	}
	parent, err := d.mkdirAll(filepath.Dir(rel), perm)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	base := filepath.Base(rel)
	if err := unix.Mkdirat(parent.fd, base, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, &os.PathError{Op: "mkdirat", Path: filepath.Join(parent.name, base), Err: err}
	}
	return d.open(rel, inRoot)
}

func openFrom(root, rel string, resolve uint64) (*Dir, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	r := newDir(fd, root)
	defer r.Close()
	return r.open(rel, resolve)
}

func newDir(fd int, name string) *Dir {
	return &Dir{f: os.NewFile(uintptr(fd), name), fd: fd, name: name}
}

// OpenDir opens the directory rel below d, following no symbolic link (as
// OpenBeneath).
func (d *Dir) OpenDir(rel string) (*Dir, error) {
	return d.open(rel, beneath)
}

func (d *Dir) open(rel string, resolve uint64) (*Dir, error) {
	fd, err := openat2(d.fd, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, resolve)
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: d.join(rel), Err: err}
	}
	return newDir(fd, d.join(rel)), nil
}

// openat2 is unix.Openat2, retried while a concurrent rename or mount makes
// the kernel refuse with EAGAIN, and with the error for kernels without it
// saying what is needed.
func openat2(dirfd int, path string, flags int, resolve uint64) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags), Resolve: resolve}
	for range 16 {
		fd, err := unix.Openat2(dirfd, path, how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS):
			return -1, fmt.Errorf("openat2 (Linux 5.6 or newer): %w", err)
		default:
			return -1, err
		}
	}
	return -1, unix.EAGAIN
}

func (d *Dir) join(rel string) string { return filepath.Join(d.name, rel) }

// Name is the path d was opened as, for messages.
func (d *Dir) Name() string { return d.name }

// Close closes d.
func (d *Dir) Close() error { return d.f.Close() }

// ProcPath is /proc/self/fd/<d's descriptor>: a path to d itself, however
// it is named now, while d is open. A socket address that is too long for
// sun_path fits under it.
func (d *Dir) ProcPath() string { return fmt.Sprintf("/proc/self/fd/%d", d.fd) }

// Stat describes d itself.
func (d *Dir) Stat() (os.FileInfo, error) { return d.f.Stat() }

// Lstat describes the file rel below d, without following a link (a link
// there is described as a link; one at another component is refused).
func (d *Dir) Lstat(rel string) (os.FileInfo, error) {
	f, err := d.openPath(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// openPath opens rel below d, following no link, with O_PATH: a link as
// the last component is opened itself.
func (d *Dir) openPath(rel string) (*os.File, error) {
	fd, err := openat2(d.fd, rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, beneath)
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: d.join(rel), Err: err}
	}
	return os.NewFile(uintptr(fd), d.join(rel)), nil
}

// openPathOf opens rel with O_PATH and checks its type: the error matches
// syscall.ELOOP for a link, want's error for anything else but want.
func (d *Dir) openPathOf(rel string, want os.FileMode, notWant syscall.Errno) (*os.File, error) {
	f, err := d.openPath(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if got := fi.Mode().Type(); got != want {
		f.Close()
		if got == os.ModeSymlink {
			return nil, &os.PathError{Op: "open", Path: d.join(rel), Err: syscall.ELOOP}
		}
		return nil, &os.PathError{Op: "open", Path: d.join(rel), Err: notWant}
	}
	return f, nil
}

// ErrTooLarge is the error (errors.Is) of ReadFile for a file larger than
// its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the regular file rel below d, following no link, and
// refuses it when it holds more than limit bytes. Anything else than a
// regular file (a link, a FIFO, a device) is refused before it is opened
// for reading.
func (d *Dir) ReadFile(rel string, limit int64) ([]byte, error) {
	p, err := d.openPathOf(rel, 0, syscall.EINVAL)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	// The O_PATH descriptor's magic link reopens that very file.
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", p.Fd()))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.join(rel), Err: errors.Unwrap(err)}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: d.join(rel), Err: err}
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", d.join(rel), ErrTooLarge, limit)
	}
	return b, nil
}

// DialUnix connects to the UNIX socket rel below d, following no link:
// the socket file is opened with O_PATH and connected through
// /proc/self/fd/<that descriptor>, so the socket connected to is the one
// found. A link fails with an error matching syscall.ELOOP, another file
// with syscall.ENOTSOCK, a missing one with syscall.ENOENT; errors name
// d's path.
func (d *Dir) DialUnix(ctx context.Context, rel string) (*net.UnixConn, error) {
	addr := &net.UnixAddr{Name: d.join(rel), Net: "unix"}
	p, err := d.openPathOf(rel, os.ModeSocket, syscall.ENOTSOCK)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: err}
	}
	defer p.Close()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", p.Fd()))
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			oe.Addr = addr
		}
		return nil, err
	}
	return conn.(*net.UnixConn), nil
}

// ListenUnix binds a UNIX socket named name (one path component) in d and
// listens on it. Closing the listener leaves the socket file: remove it
// with Remove.
func (d *Dir) ListenUnix(name string) (*net.UnixListener, error) {
	if err := component(name); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", d.ProcPath()+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("listen unix %s: %w", d.join(name), err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// Remove removes the file name (one path component, not a directory) from
// d; a link is removed, not followed.
func (d *Dir) Remove(name string) error {
	if err := component(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &os.PathError{Op: "unlinkat", Path: d.join(name), Err: err}
	}
	return nil
}

// component checks that name is one path component.
func component(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("safepath: %q is not a file name", name)
	}
	return nil
}

// OwnSocket gives the UNIX socket name (one path component) in d the owner
// uid:gid and mode, following no link: anything but a socket there is
// refused (syscall.ENOTSOCK, or syscall.ELOOP for a link) and left as it is.
func (d *Dir) OwnSocket(name string, mode os.FileMode, uid, gid int) error {
	if err := component(name); err != nil {
		return err
	}
	f, err := d.openPathOf(name, os.ModeSocket, syscall.ENOTSOCK)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fchownat(int(f.Fd()), "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "chown", Path: d.join(name), Err: err}
	}
	// chmod has no AT_EMPTY_PATH: the O_PATH descriptor's /proc link names
	// the socket itself.
	if err := os.Chmod(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), mode); err != nil {
		return &os.PathError{Op: "chmod", Path: d.join(name), Err: err}
	}
	return nil
}
