// Command container-disk serves a container disk image to the launcher of
// its pod. It runs inside the disk image's container, whose root
// filesystem holds the disk (KubeVirt's layout: /disk/<image file>) or, for
// a kernel-boot image, the kernel and initrd (e.g. /boot/vmlinux).
// podtemplate renders two containers per image, both running
// /usr/bin/container-disk, a static binary copied out of the launcher
// image:
//
//	container-disk --no-op
//
// exits at once: the init container only makes the kubelet pull the image
// before the launcher starts.
//
//	container-disk --copy-path <container-disk-dir>/<vmi uid>/<served name>
//
// copies /disk and /boot (those that exist) into the copy path, keeping
// their relative paths (<copy path>/disk/..., <copy path>/boot/...), then
// stays alive until SIGTERM or SIGINT, or until the copy path is removed
// (the launcher removes it when its guest has ended, so that the pod
// completes after a shutdown or a migration away), and exits 0. The launcher
// (nodeagent/launcher) looks for the image there. The copy is atomic: it is
// made in a hidden sibling (.<served name>.tmp-*, which the launcher never
// matches) and renamed to the copy path when complete. Files are hard
// links when source and target share a filesystem, else copies (holes of
// sparse images are kept). A copy path that already exists was served by
// an earlier run of the container (the pod's volume outlives it) and is
// kept. It exits non-zero, naming the paths, when the image has neither
// directory or no file in them.
//
// --root (default /) is the root filesystem to serve from, for tests.
// Symbolic links are followed, resolved against the real root.
//
// It uses the standard library only and builds with CGO_ENABLED=0: disk
// images have no libc.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: it returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fset := flag.NewFlagSet("container-disk", flag.ContinueOnError)
	fset.SetOutput(stderr)
	noOp := fset.Bool("no-op", false, "exit at once (the init container only makes the kubelet pull the image)")
	copyPath := fset.String("copy-path", "", "where to serve the image's /disk and /boot: <copy-path>/disk/..., <copy-path>/boot/...")
	root := fset.String("root", "/", "root filesystem to serve from (for tests)")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	switch {
	case fset.NArg() > 0:
		fmt.Fprintf(stderr, "container-disk: unexpected arguments %q\n", fset.Args())
		return 2
	case *noOp:
		return 0
	case *copyPath == "":
		fmt.Fprintln(stderr, "container-disk: --copy-path or --no-op is required")
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- serve(*root, *copyPath, os.Link) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(stderr, "container-disk: %v\n", err)
			return 1
		}
	case <-ctx.Done():
		return 0 // stopped while copying; the next run removes the partial copy
	}
	fmt.Fprintf(stderr, "container-disk: serving %s at %s\n", *root, *copyPath)
	// The launcher removes the copy once its guest has ended (shut down or
	// migrated away): then nothing is served any more, and the container
	// exits so that the pod can complete, as KubeVirt's container disks do
	// when their socket is gone.
	tick := time.NewTicker(gonePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
			if _, err := os.Lstat(*copyPath); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(stderr, "container-disk: %s was removed: the launcher is done with it\n", *copyPath)
				return 0
			}
		}
	}
}

// gonePoll is how often a serving container-disk checks that its copy is
// still there.
var gonePoll = time.Second

// serve copies the served directories of root into dst, atomically: into
// a hidden sibling, renamed to dst when complete. link makes a hard link;
// when it fails the file is copied. An existing dst is kept.
func serve(root, dst string, link func(oldname, newname string) error) error {
	// KubeVirt's disk layout and the kernel-boot files.
	served := [...]string{"disk", "boot"}
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

func joinAll(root string, dirs []string) string {
	s := ""
	for i, d := range dirs {
		if i > 0 {
			s += " or "
		}
		s += filepath.Join(root, d)
	}
	return s
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
