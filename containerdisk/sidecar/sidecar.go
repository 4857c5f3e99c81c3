// Package sidecar is the pod side of a container disk: what the
// container-disk sidecar of a launcher pod does with the image it runs in.
// The image's root filesystem holds the disk (KubeVirt's layout,
// /disk/<image file>, as package containerdisk makes it) or, for a
// kernel-boot image, the kernel and initrd (e.g. /boot/vmlinux). Serve
// copies /disk and /boot (those that exist) into a copy path on a volume
// the pod shares with its launcher, which looks for the image there
// (nodeagent/launcher); WaitRemoved tells when the launcher is done with
// it.
//
// # The copy
//
// Serve keeps the directories' relative paths (<copy path>/disk/...,
// <copy path>/boot/...) and follows symbolic links. Files are hard links
// when source and target share a filesystem, else copies that keep the
// holes of sparse images. The copy is atomic: it is made in a hidden
// sibling (.<copy path's name>.tmp-*, which the launcher never matches)
// and renamed to the copy path when complete, so the launcher never sees
// half an image. A copy path that already exists was served by an earlier
// run of the sidecar (the pod's volume outlives the container) and is
// kept; partial copies an earlier run left are removed.
//
// The package uses the standard library only, so the static
// container-disk binary (cmd/container-disk, built with CGO_ENABLED=0 and
// copied into images that have no libc) stays small.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// served are the directories of an image's root that Serve copies:
// KubeVirt's disk layout and the kernel-boot files.
var served = [...]string{"disk", "boot"}

// Options configure Serve. The zero value hard-links where it can.
type Options struct {
	// Link makes newname a hard link to oldname, as os.Link (the
	// default) does. Where it fails (another filesystem, protected hard
	// links), Serve copies the file instead.
	Link func(oldname, newname string) error
}

// Serve copies the directories disk and boot (those that exist) of the
// root filesystem root to the copy path dst, atomically (see the package documentation). It
// returns an error naming the paths when root has none of the directories,
// when one is not a directory, or when they hold no regular file; then it
// leaves nothing behind. An existing dst is kept as it is.
//
// Serve does not stop early: a process stopped while it copies leaves a
// hidden partial copy, which the next Serve to dst removes.
func Serve(root, dst string, opts Options) error {
	link := opts.Link
	if link == nil {
		link = os.Link
	}
	var dirs []string
	for _, d := range served {
		p := filepath.Join(root, d)
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			dirs = append(dirs, d)
		case err == nil:
			return fmt.Errorf("%s is not a directory", p)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	if len(dirs) == 0 {
		return fmt.Errorf("nothing to serve: neither %s nor %s exists", filepath.Join(root, served[0]), filepath.Join(root, served[1]))
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil // served by an earlier run of this container
	}
	parent, prefix := filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-"
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	// Partial copies of an earlier run stopped while copying.
	if old, err := filepath.Glob(filepath.Join(parent, prefix+"*")); err == nil {
		for _, o := range old {
			if err := os.RemoveAll(o); err != nil {
				return fmt.Errorf("removing an earlier partial copy: %w", err)
			}
		}
	}
	tmp, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return err
	}
	files := 0
	for _, d := range dirs {
		n, err := copyTree(filepath.Join(root, d), filepath.Join(tmp, d), link, 0)
		files += n
		if err != nil {
			_ = os.RemoveAll(tmp)
			return err
		}
	}
	if files == 0 {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("nothing to serve: no file under %s", joinAll(root, dirs))
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it 0700
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return nil
}

// WaitRemoved checks every interval (a second when it is not positive)
// whether path still exists. It returns true once path is gone (the
// launcher removes the copy when its guest has ended: shut down or
// migrated away), false when ctx ends first.
func WaitRemoved(ctx context.Context, path string, interval time.Duration) bool {
	if interval <= 0 {
		interval = time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
				return true
			}
		}
	}
}

// joinAll names the directories dirs of root, joined by "or".
func joinAll(root string, dirs []string) string {
	paths := make([]string, len(dirs))
	for i, d := range dirs {
		paths[i] = filepath.Join(root, d)
	}
	return strings.Join(paths, " or ")
}

// maxDepth bounds the directory levels copyTree descends, against loops of
// symbolic links.
const maxDepth = 16

// copyTree copies the directory src to dst, following symbolic links, and
// returns how many files it copied. Other than directories and regular
// files (sockets, devices) are skipped.
func copyTree(src, dst string, link func(oldname, newname string) error, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("%s: more than %d levels of directories (a loop of symbolic links?)", src, maxDepth)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return 0, err
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			if s, err = filepath.EvalSymlinks(s); err != nil {
				return n, err
			}
		}
		fi, err := os.Stat(s)
		if err != nil {
			return n, err
		}
		switch {
		case fi.IsDir():
			m, err := copyTree(s, d, link, depth+1)
			n += m
			if err != nil {
				return n, err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(s, d, fi, link); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// copyFile hard-links src to dst or, when that fails (another filesystem,
// protected hard links), copies it.
func copyFile(src, dst string, fi fs.FileInfo, link func(oldname, newname string) error) error {
	if link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if err := copySparse(out, in, fi.Size()); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

// lseek(2) whence values of Linux that find data and holes.
const (
	seekData = 3
	seekHole = 4
)

// copySparse copies the size bytes of in to out, leaving holes where in
// has them (raw disk images are mostly holes). Where the filesystem cannot
// tell holes, it copies everything.
func copySparse(out, in *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := in.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break // a hole up to the end
		}
		if err != nil { // no SEEK_DATA here: copy the rest
			if _, err := in.Seek(off, io.SeekStart); err != nil {
				return err
			}
			if _, err := out.Seek(off, io.SeekStart); err != nil {
				return err
			}
			_, err := io.Copy(out, in)
			return err
		}
		hole, err := in.Seek(data, seekHole)
		if err != nil {
			return err
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}
