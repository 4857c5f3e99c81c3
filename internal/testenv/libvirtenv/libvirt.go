// Package libvirtenv gives integration tests a working libvirt daemon and
// the tiny test guest, or fails them naming what is missing and the command
// that installs it (never a silent skip); under -short (make unit) it skips
// them. It needs no Kubernetes: tests of the hypervisor and the launcher
// use it alone, tests of a whole node with package testenv.
package libvirtenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// LibvirtURIEnv names the environment variable that overrides the libvirt
	// connection URI used by RequireLibvirt.
	LibvirtURIEnv = "VMKIT_LIBVIRT_URI"
	// DefaultLibvirtURI is the libvirt URI used when LibvirtURIEnv is unset.
	DefaultLibvirtURI = "qemu:///system"
	// GuestDirEnv names the environment variable that overrides the directory
	// RequireGuest looks in (default: _output/guest under the module root).
	GuestDirEnv = "VMKIT_GUEST_DIR"

	libvirtSocket = "/run/libvirt/libvirt-sock"
	// The first connection after libvirtd starts probes QEMU's capabilities,
	// which takes 3-8 s on a small machine; later calls take milliseconds.
	libvirtProbeTimeout = 30 * time.Second

	installLibvirt = "`make test-deps` (or hack/setup-libvirt.sh, as root)"
	installGuest   = "`make test-deps` (or hack/make-guest.sh, as root)"
)

// RequireLibvirt returns the URI of a working libvirt daemon for integration
// tests: $VMKIT_LIBVIRT_URI, or qemu:///system when unset. It fails the test,
// naming what is missing and the command that installs it, unless virsh is
// installed, the local daemon's socket exists (for local */system URIs) and
// "virsh -c URI version" answers. Under -short (make unit) it skips the test.
func RequireLibvirt(t testing.TB) string {
	t.Helper()
	skipShort(t, "libvirt")
	uri := os.Getenv(LibvirtURIEnv)
	if uri == "" {
		uri = DefaultLibvirtURI
	}

	virsh, err := exec.LookPath("virsh")
	if err != nil {
		t.Fatalf("testenv: virsh (Debian package libvirt-clients) is not installed; install libvirt with: %s", installLibvirt)
	}
	if usesLocalDaemon(uri) {
		if _, err := os.Stat(libvirtSocket); err != nil {
			t.Fatalf("testenv: libvirtd is not running (no socket %s: %v); install and start it with: %s",
				libvirtSocket, err, installLibvirt)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), libvirtProbeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, virsh, "-c", uri, "version").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("testenv: %q did not answer within %s; is libvirtd healthy? (re)start it with: %s",
			"virsh -c "+uri+" version", libvirtProbeTimeout, installLibvirt)
	}
	if err != nil {
		t.Fatalf("testenv: %q failed: %v\n%s\ninstall and start libvirt with: %s",
			"virsh -c "+uri+" version", err, strings.TrimSpace(string(out)), installLibvirt)
	}
	return uri
}

// usesLocalDaemon reports whether uri is served by the local privileged
// daemon through its UNIX socket (e.g. qemu:///system), as opposed to a remote
// host, a session daemon or the daemon-less test driver.
func usesLocalDaemon(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	return u.Host == "" && u.Path == "/system" &&
		(!strings.Contains(u.Scheme, "+") || strings.HasSuffix(u.Scheme, "+unix"))
}

// Guest is the tiny direct-kernel-boot test guest built by hack/make-guest.sh.
// All paths are absolute, as libvirt domain XML requires. Boot it with the
// kernel command line "console=ttyS0 panic=-1 quiet", machine type "pc" and
// ACPI enabled: its /init prints "GUEST-BOOTED" on the first serial port.
type Guest struct {
	// Kernel is the uncompressed kernel (vmlinux), which boots about twice as
	// fast as the compressed bzImage under TCG.
	Kernel string
	// Initramfs prints GUEST-BOOTED on the serial console, then powers off.
	Initramfs string
	// IdleInitramfs prints GUEST-BOOTED, then idles until the domain is
	// destroyed.
	IdleInitramfs string
}

// RequireGuest returns the test guest's files from $VMKIT_GUEST_DIR, or from
// _output/guest under the module root when unset. It fails the test, naming
// the missing files and the command that builds them, if any is absent;
// under -short (make unit) it skips the test.
func RequireGuest(t testing.TB) Guest {
	t.Helper()
	skipShort(t, "the test guest (hack/make-guest.sh)")
	dir := os.Getenv(GuestDirEnv)
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatalf("testenv: working directory: %v", err)
		}
		root, err := findModuleRoot(wd)
		if err != nil {
			t.Fatalf("testenv: cannot locate the guest directory: %v (or set %s)", err, GuestDirEnv)
		}
		dir = filepath.Join(root, "_output", "guest")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("testenv: guest directory %q: %v", dir, err)
	}

	g := Guest{
		Kernel:        filepath.Join(dir, "vmlinux"),
		Initramfs:     filepath.Join(dir, "initramfs.cpio.gz"),
		IdleInitramfs: filepath.Join(dir, "initramfs-idle.cpio.gz"),
	}
	var missing []string
	for _, f := range []string{g.Kernel, g.Initramfs, g.IdleInitramfs} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			missing = append(missing, filepath.Base(f))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("testenv: test guest incomplete in %s (missing %s); build it with: %s",
			dir, strings.Join(missing, ", "), installGuest)
	}
	return g
}

// findModuleRoot returns the nearest directory at or above dir that holds a
// go.mod file.
func findModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
		d = parent
	}
}

// skipShort skips t under -short, `make unit`, which promises to need
// nothing installed; `make test` (never -short) runs it, and there a
// missing component fails the test instead.
func skipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("testenv: needs %s; skipped under -short (make unit), run by make test", needs)
	}
}
