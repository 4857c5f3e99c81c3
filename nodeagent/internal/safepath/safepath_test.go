package safepath

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tree makes, below a new root, a/b/c holding a regular file f, a socket s
// served by a listener that writes "hello" and a FIFO p, and returns the
// root. Outside the root it makes a copy of the same tree (the target of
// links).
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	for _, top := range []string{"root", "outside"} {
		dir := filepath.Join(base, top, "a", "b", "c")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(top), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(filepath.Join(dir, "p"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("unix", "/proc/self/fd/"+strconv.Itoa(int(d.Fd()))+"/s")
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, top)
				c.Close()
			}
		}()
	}
	return filepath.Join(base, "root"), filepath.Join(base, "outside")
}

// replaceByLink replaces path by a symbolic link to target.
func replaceByLink(t *testing.T, path, target string) {
	t.Helper()
	if err := os.Rename(path, path+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// Every way through a/b/c/{f,s} works without links.
func TestBeneathWithoutLinks(t *testing.T) {
	root, _ := tree(t)
	d, err := OpenBeneath(root, "a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := d.ReadFile("f", 100); err != nil || string(b) != "root" {
		t.Errorf("ReadFile: %q, %v", b, err)
	}
	if got := readSocket(t, d, "s"); got != "root" {
		t.Errorf("DialUnix read %q, want root", got)
	}
	if fi, err := d.Lstat("s"); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("Lstat(s): %v, %v", fi, err)
	}
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		t.Errorf("Stat: %v, %v", fi, err)
	}
	// The directory is reached through ProcPath however it is named now.
	if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(d.ProcPath() + "/f"); err != nil || string(b) != "root" {
		t.Errorf("ReadFile(ProcPath/f) after a rename: %q, %v", b, err)
	}
	sub, err := OpenBeneath(root, "moved")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if c, err := sub.OpenDir("b/c"); err != nil {
		t.Errorf("OpenDir(b/c): %v", err)
	} else {
		c.Close()
	}
}

func readSocket(t *testing.T, d *Dir, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialUnix(ctx, name)
	if err != nil {
		t.Fatalf("DialUnix(%s): %v", name, err)
	}
	defer c.Close()
	b, _ := io.ReadAll(c)
	return string(b)
}

// A symbolic link at any component below the trusted root is refused,
// whether it points into the tree or out of it; so are .. out of it and
// /proc's magic links. The root itself may be a link.
func TestBeneathRefusesLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		// link replaces root/<link> by a link to target: the same
		// directory outside the root when out, else target as is (the
		// renamed original beside it, or a magic link).
		link, target string
		out          bool
	}{
		{"first component, out", "a", "a", true},
		{"middle component, out", "a/b", "a/b", true},
		{"last directory, out", "a/b/c", "a/b/c", true},
		{"first component, in", "a", "a.real", false},
		{"last directory, in", "a/b/c", "c.real", false},
		{"magic link", "a/b/c", "/proc/self/cwd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := tree(t)
			target := tc.target
			if tc.out {
				target = filepath.Join(outside, target)
			}
			replaceByLink(t, filepath.Join(root, tc.link), target)
			if d, err := OpenBeneath(root, "a/b/c"); !errors.Is(err, syscall.ELOOP) {
				t.Errorf("OpenBeneath(a/b/c) through a link at %s: %v, want ELOOP", tc.link, err)
				if err == nil {
					d.Close()
				}
			}
		})
	}

	root, outside := tree(t)
	d, err := OpenBeneath(root, "a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for name, target := range map[string]string{"f": filepath.Join(outside, "a/b/c/f"), "s": filepath.Join(outside, "a/b/c/s")} {
		replaceByLink(t, filepath.Join(root, "a/b/c", name), target)
	}
	if b, err := d.ReadFile("f", 100); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("ReadFile of a link: %q, %v, want ELOOP", b, err)
	}
	ctx := context.Background()
	if c, err := d.DialUnix(ctx, "s"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("DialUnix of a link: %v, want ELOOP", err)
		if err == nil {
			c.Close()
		}
	}
	if fi, err := d.Lstat("s"); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Errorf("Lstat of a link: %v, %v; want the link described", fi, err)
	}
	if _, err := d.ReadFile("../../../../outside/a/b/c/f", 100); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("ReadFile of ..: %v, want EXDEV", err)
	}
	if _, err := OpenBeneath(root, "/a"); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("OpenBeneath of an absolute path: %v, want EXDEV", err)
	}
	// The trusted root may itself be a link.
	link := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	if d, err := OpenBeneath(link, "a/b"); err != nil {
		t.Errorf("OpenBeneath below a linked root: %v", err)
	} else {
		d.Close()
	}
}

// What is not a regular file is not read, nor connected to when it is no
// socket; a FIFO does not block; a file above the limit is refused.
func TestBeneathFileTypes(t *testing.T) {
	root, _ := tree(t)
	d, err := OpenBeneath(root, "a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	done := make(chan error, 1)
	go func() { _, err := d.ReadFile("p", 100); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("ReadFile of a FIFO succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile of a FIFO blocked")
	}
	if _, err := d.ReadFile("s", 100); err == nil {
		t.Error("ReadFile of a socket succeeded")
	}
	if _, err := d.ReadFile(".", 100); err == nil {
		t.Error("ReadFile of a directory succeeded")
	}
	if _, err := d.ReadFile("f", 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile of 4 bytes with a limit of 3: %v, want ErrTooLarge", err)
	}
	if b, err := d.ReadFile("f", 4); err != nil || string(b) != "root" {
		t.Errorf("ReadFile of 4 bytes with a limit of 4: %q, %v", b, err)
	}
	ctx := context.Background()
	if _, err := d.DialUnix(ctx, "f"); !errors.Is(err, syscall.ENOTSOCK) {
		t.Errorf("DialUnix of a regular file: %v, want ENOTSOCK", err)
	}
	if _, err := d.DialUnix(ctx, "missing"); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), filepath.Join(root, "a/b/c/missing")) {
		t.Errorf("DialUnix of a missing socket: %v, want ENOENT naming its path", err)
	}
}

// In a launcher's root, links resolve as they would in it: an absolute
// link, or .. past the root, stays inside. MkdirAllInRoot makes what is
// missing there; ListenUnix binds in the opened directory and Remove
// removes only a name in it.
func TestInRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	for _, d := range []string{filepath.Join(root, "run", "kubevirt"), filepath.Join(root, "var"), filepath.Join(base, "run", "kubevirt")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// An image's /var/run -> /run; and a tenant's link out of it.
	if err := os.Symlink("/run", filepath.Join(root, "var", "run")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../..", filepath.Join(root, "run", "kubevirt", "up")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenInRoot(root, "/var/run/kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.WriteFile(filepath.Join(root, "run", "kubevirt", "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lstat("marker"); err != nil {
		t.Errorf("OpenInRoot(/var/run/kubevirt) is not root/run/kubevirt: %v", err)
	}
	up, err := OpenInRoot(root, "/var/run/kubevirt/up/run")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if _, err := up.Lstat("kubevirt/marker"); err != nil {
		t.Errorf("a link above the root left it: %v", err)
	}
	if _, err := OpenInRoot(root, "/proc/self/root"); err == nil {
		t.Error("OpenInRoot followed a path that is not in the root")
	}

	made, err := MkdirAllInRoot(root, "/var/run/kubevirt/migrationproxy/x", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	defer made.Close()
	if fi, err := os.Stat(filepath.Join(root, "run/kubevirt/migrationproxy/x")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750&^umask() {
		t.Errorf("MkdirAllInRoot made %v, %v", fi, err)
	}
	again, err := MkdirAllInRoot(root, "/var/run/kubevirt/migrationproxy/x", 0o750)
	if err != nil {
		t.Errorf("MkdirAllInRoot of an existing directory: %v", err)
	} else {
		again.Close()
	}

	ln, err := made.ListenUnix("a-very-long-socket-name-" + strings.Repeat("x", 60) + ".sock")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	name := filepath.Base(ln.Addr().String())
	if fi, err := made.Lstat(name); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("the socket ListenUnix bound: %v, %v", fi, err)
	}
	if err := made.Remove(name); err != nil {
		t.Errorf("Remove: %v", err)
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if err := made.Remove(bad); err == nil {
			t.Errorf("Remove(%q) succeeded", bad)
		}
		if _, err := made.ListenUnix(bad); err == nil {
			t.Errorf("ListenUnix(%q) succeeded", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "run", "kubevirt", "migrationproxy")); !os.IsNotExist(err) {
		t.Errorf("MkdirAllInRoot made a directory outside the root: %v", err)
	}
}

func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

// OwnSocket changes the socket and nothing a link or another file there
// would lead to.
func TestOwnSocket(t *testing.T) {
	root, outside := tree(t)
	d, err := OpenBeneath(root, "a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	target := filepath.Join(outside, "a/b/c/s")
	before, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	replaceByLink(t, filepath.Join(root, "a/b/c/f"), target)
	for name, want := range map[string]error{"f": syscall.ELOOP, "p": syscall.ENOTSOCK, "../c/s": nil} {
		if err := d.OwnSocket(name, 0o660, 107, 107); err == nil || (want != nil && !errors.Is(err, want)) {
			t.Errorf("OwnSocket(%q) = %v, want %v", name, err, want)
		}
	}
	if err := d.OwnSocket("s", 0o660, 107, 108); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "a/b/c/s"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Uid != 107 || st.Gid != 108 {
		t.Errorf("socket mode %v owner %d:%d, want 0660 107:108", fi.Mode().Perm(), st.Uid, st.Gid)
	}
	after, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if after.Mode() != before.Mode() || after.Sys().(*syscall.Stat_t).Uid != before.Sys().(*syscall.Stat_t).Uid {
		t.Errorf("the link's target changed: %v → %v", before.Mode(), after.Mode())
	}
}
