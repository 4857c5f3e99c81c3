package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The libvirt the launcher starts in its container runs as the launcher
// does. As root (the KubeVirt CR's Root feature gate) it is libvirt's
// system instance, configured by the image's /etc/libvirt and reached at
// qemu:///system. As any other user (the qemu user 107, the default) it is
// a session instance, KubeVirt's non-root mode: libvirtd and virtlogd find
// their configuration under $XDG_CONFIG_HOME/libvirt, keep domains, logs
// and the capability cache under $XDG_CONFIG_HOME and $XDG_CACHE_HOME, and
// listen under $XDG_RUNTIME_DIR/libvirt; QEMU runs as the same user. The
// launcher pod sets the XDG variables (the private volume, and /var/run
// whose libvirt directory is the libvirt-runtime volume); unset, they get
// the same values here, so a non-root launcher started by hand works too.

// sessionSocket is libvirtd's socket in session mode, under
// $XDG_RUNTIME_DIR.
const sessionSocket = "libvirt/libvirt-sock"

// The session daemons' configuration, written at every start (the
// private volume is the pod's own). QEMU runs as the launcher's user
// without a security driver, cgroups or namespaces (the pod's security
// context and the container are the boundary), changes no file's owner
// (the node agent gave the launcher's user what it must open), and sends
// its output and the guest's serial log through virtlogd.
const (
	sessionQEMUConf = `# Written by virt-launcher: libvirt's session instance in the launcher pod.
stdio_handler = "logd"
cgroup_controllers = [ ]
namespaces = [ ]
security_driver = "none"
dynamic_ownership = 0
remember_owner = 0
`
	sessionLibvirtdConf = `# Written by virt-launcher: warnings and errors on stderr, which virt-launcher passes on.
log_outputs = "3:stderr"
`
	sessionVirtlogdConf = sessionLibvirtdConf
)

// session is where a session instance of libvirt keeps its files.
type session struct {
	runtimeDir, configHome, cacheHome string
}

// newSession reads the XDG directories from the environment, defaulting
// to KubeVirt's (/var/run and privateDir), and sets the defaults in the
// environment so the daemons inherit them.
func newSession(privateDir string) (session, error) {
	s := session{}
	for _, v := range []struct {
		name, def string
		dst       *string
	}{
		{"XDG_RUNTIME_DIR", "/var/run", &s.runtimeDir},
		{"XDG_CONFIG_HOME", privateDir, &s.configHome},
		{"XDG_CACHE_HOME", privateDir, &s.cacheHome},
	} {
		*v.dst = os.Getenv(v.name)
		if *v.dst == "" {
			*v.dst = v.def
			if err := os.Setenv(v.name, v.def); err != nil {
				return s, err
			}
		}
		if !filepath.IsAbs(*v.dst) {
			return s, fmt.Errorf("%s=%q: libvirt's session directories must be absolute paths", v.name, *v.dst)
		}
	}
	return s, nil
}

// swtpmStorageDir is where the session instance keeps TPM state
// (libvirt's $XDG_CONFIG_HOME/libvirt/qemu/swtpm).
func (s session) swtpmStorageDir() string {
	return filepath.Join(s.configHome, "libvirt", "qemu", "swtpm")
}

// systemSwtpmStorageDir is where libvirt's system instance keeps TPM state.
const systemSwtpmStorageDir = "/var/lib/libvirt/swtpm"

// uri is the libvirt URI of the session instance: its socket named
// explicitly, so the client never spawns a daemon of its own.
func (s session) uri() string {
	return "qemu+unix:///session?socket=" + filepath.Join(s.runtimeDir, sessionSocket)
}

// configure writes the daemons' configuration and creates their socket
// directory.
func (s session) configure() error {
	dir := filepath.Join(s.configHome, "libvirt")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("libvirt session configuration: %w", err)
	}
	qemuConf := sessionQEMUConf
	if hugetlbfs(hugePagesDir) {
		// Only the system instance finds hugetlbfs mounts by itself: the
		// session one backs a guest with huge pages only from a mount it
		// is told of (the pod's, for a VMI with spec.domain.memory.hugepages).
		qemuConf += "hugetlbfs_mount = \"" + hugePagesDir + "\"\n"
	}
	for name, content := range map[string]string{
		"qemu.conf":     qemuConf,
		"libvirtd.conf": sessionLibvirtdConf,
		"virtlogd.conf": sessionVirtlogdConf,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("libvirt session configuration: %w", err)
		}
	}
	sockDir := filepath.Dir(filepath.Join(s.runtimeDir, sessionSocket))
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return fmt.Errorf("libvirt session sockets: %w (XDG_RUNTIME_DIR=%s must be writable by uid %d)", err, s.runtimeDir, os.Geteuid())
	}
	return nil
}

// hugePagesDir is where a launcher pod of a VMI backed by huge pages mounts
// its hugetlbfs (podtemplate).
const hugePagesDir = "/dev/hugepages"

// hugetlbfs reports whether dir is a hugetlbfs mount.
func hugetlbfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.HUGETLBFS_MAGIC
}
