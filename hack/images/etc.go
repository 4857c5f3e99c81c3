package main

import (
	"archive/tar"
	"fmt"
	"path"
	"slices"
	"strings"
)

// user is a line of /etc/passwd; its primary group has the same id.
type user struct {
	Name string
	UID  int
	Home string
}

// group is a line of /etc/group.
type group struct {
	Name    string
	GID     int
	Members []string
}

// The accounts of the images. nonRootUID is the numeric user of
// virt-operator, virt-controller and virt-api, whose pods run with runAsNonRoot;
// qemuUID is the user of the launcher pod's helper containers
// (podtemplate's nonRootUID) and libvirt's compiled-in QEMU user.
const (
	nonRootUID = 1001
	qemuUID    = 107
	kvmGID     = 36
	libvirtGID = 108
	nobodyUID  = 65534
)

// Accounts of every image but the launcher.
var (
	baseUsers = []user{
		{Name: "root", UID: 0, Home: "/root"},
		{Name: "qemu", UID: qemuUID, Home: "/"},
		{Name: "vmkit", UID: nonRootUID, Home: "/"},
		{Name: "nobody", UID: nobodyUID, Home: "/nonexistent"},
	}
	baseGroups = []group{
		{Name: "root", GID: 0},
		{Name: "qemu", GID: qemuUID},
		{Name: "vmkit", GID: nonRootUID},
		{Name: "nogroup", GID: nobodyUID},
	}
)

// Accounts of the launcher: libvirt-qemu (libvirt's compiled-in QEMU user,
// which libvirt looks up at start) is the user the launcher pod runs as,
// and libvirt's session instance needs its passwd entry.
var (
	launcherUsers = []user{
		{Name: "root", UID: 0, Home: "/root"},
		{Name: "libvirt-qemu", UID: qemuUID, Home: "/var/lib/libvirt"},
		{Name: "nobody", UID: nobodyUID, Home: "/nonexistent"},
	}
	launcherGroups = []group{
		{Name: "root", GID: 0},
		{Name: "kvm", GID: kvmGID, Members: []string{"libvirt-qemu"}},
		{Name: "libvirt-qemu", GID: qemuUID},
		{Name: "libvirt", GID: libvirtGID},
		{Name: "nogroup", GID: nobodyUID},
	}
)

// passwdFile renders /etc/passwd: no password, no login shell.
func passwdFile(users []user) []byte {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s:x:%d:%d:%s:%s:/usr/sbin/nologin\n", u.Name, u.UID, u.UID, u.Name, u.Home)
	}
	return []byte(b.String())
}

// groupFile renders /etc/group.
func groupFile(groups []group) []byte {
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, "%s:x:%d:%s\n", g.Name, g.GID, strings.Join(g.Members, ","))
	}
	return []byte(b.String())
}

// addAccounts adds /etc/passwd, /etc/group and the directories every image
// has: /tmp and /var/tmp (sticky, world-writable) and root's home.
func addAccounts(t *tree, users []user, groups []group) {
	t.Dir("etc", 0o755)
	t.File("etc/passwd", 0o644, passwdFile(users))
	t.File("etc/group", 0o644, groupFile(groups))
	t.Dir("tmp", 0o1777)
	t.Dir("var/tmp", 0o1777)
	t.Dir("root", 0o700)
}

// qemuConf is /etc/libvirt/qemu.conf of the launcher with the Root feature
// gate (a non-root launcher runs libvirt as a session instance with
// virt-launcher's own configuration): libvirtd and QEMU run as root inside
// the container, without systemd, cgroup management, mount
// namespaces or a security driver (the pod's security context is the
// boundary, as in KubeVirt).
const qemuConf = `# Written by vmkit's hack/images for the virt-launcher container.
# QEMU runs as root inside the container; no file ownership changes.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
# The container runtime owns the cgroups and namespaces.
cgroup_controllers = [ ]
namespaces = [ ]
security_driver = "none"
# Guest serial and QEMU output go through virtlogd (started by virt-launcher).
stdio_handler = "logd"
# swtpm (a guest's TPM) runs as root too: the image has no tss user.
swtpm_user = "root"
swtpm_group = "root"
`

// libvirtdConf is /etc/libvirt/libvirtd.conf of the launcher: only the
// local UNIX socket, which only the launcher (root in the container) uses.
const libvirtdConf = `# Written by vmkit's hack/images for the virt-launcher container.
listen_tls = 0
listen_tcp = 0
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
# Warnings and errors on stderr, which virt-launcher passes on.
log_outputs = "3:stderr"
`

// virtlogdConf is /etc/libvirt/virtlogd.conf of the launcher.
const virtlogdConf = `# Written by vmkit's hack/images for the virt-launcher container.
log_outputs = "3:stderr"
`

// launcherDirs are the directories libvirtd and QEMU expect, which
// maintainer scripts and systemd-tmpfiles would otherwise create.
// var/lib/libvirt/qemu/nvram, where domainxml puts each EFI guest's
// variable store, is writable by all (sticky, like /tmp): the launcher runs
// as the qemu user 107 unless the Root feature gate is on, and the
// container's root file system is its own.
var launcherDirs = []struct {
	path string
	mode int64
}{
	{"run", 0o755},
	{"run/libvirt", 0o755},
	{"run/libvirt/qemu", 0o755},
	{"run/lock", 0o1777},
	{"var/cache/libvirt", 0o711},
	{"var/cache/libvirt/qemu", 0o750},
	{"var/lib/libvirt", 0o755},
	{"var/lib/libvirt/qemu", 0o751},
	{"var/lib/libvirt/qemu/nvram", 0o1777},
	{"var/lib/libvirt/images", 0o711},
	{"var/log/libvirt", 0o700},
	{"var/log/libvirt/qemu", 0o751},
	{"etc/libvirt/qemu", 0o755},
	// swtpm_setup's certificate authority as root (a non-root launcher's
	// libvirt session keeps its own under XDG_CONFIG_HOME).
	{"var/lib/swtpm-localca", 0o750},
}

// addLauncherConfig adds what makes the Debian packages a working libvirt
// inside a container: accounts, the libvirt configuration, the runtime
// directories and /var/run as a link to /run.
func addLauncherConfig(t *tree) {
	addAccounts(t, launcherUsers, launcherGroups)
	t.File("etc/libvirt/qemu.conf", 0o600, []byte(qemuConf))
	t.File("etc/libvirt/libvirtd.conf", 0o644, []byte(libvirtdConf))
	t.File("etc/libvirt/virtlogd.conf", 0o644, []byte(virtlogdConf))
	for _, d := range launcherDirs {
		t.Dir(d.path, d.mode)
	}
	t.Symlink("var/run", "/run")
}

// addMergedUsrAliases adds, for every entry of /bin and /sbin that
// /usr/bin or /usr/sbin lacks, a relative symlink there: Debian 12's
// packages put cp, ls and friends in /bin, while a Debian 12 system (and
// podtemplate's container-disk-binary container, which runs /usr/bin/cp)
// has merged /usr. It returns how many links it added.
func addMergedUsrAliases(t *tree) int {
	n := 0
	for _, dir := range []string{"bin", "sbin"} {
		var names []string
		for p, e := range t.entries {
			if name, ok := strings.CutPrefix(p, dir+"/"); ok && !strings.Contains(name, "/") && e.typ != tar.TypeDir {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			alias := "usr/" + dir + "/" + name
			if _, ok := t.entries[alias]; ok {
				continue
			}
			t.Symlink(alias, "../../"+dir+"/"+name)
			n++
		}
	}
	return n
}

// slimPrefixes are the documentation, manual pages and translations that a
// container does not use, as Debian's slim images leave them out
// (path-exclude in dpkg.cfg.d); copyright files stay.
var slimPrefixes = []string{"usr/share/doc/", "usr/share/info/", "usr/share/lintian/", "usr/share/locale/", "usr/share/man/"}

// slimFiles are single files a launcher does not need: QEMU binaries for
// other machine kinds. libvirtd probes every qemu-system-<arch> it finds
// when it starts, in each launcher pod; qemu-system-i386 is a wrapper
// around qemu-system-x86_64, so the probe would run twice (each several
// seconds under load) for guests that are always x86_64.
var slimFiles = []string{"usr/bin/qemu-system-i386", "usr/bin/qemu-system-x86_64-microvm"}

// slimKeep are paths below slimPrefixes that stay.
func slimKeep(p string, e entry) bool {
	if strings.HasPrefix(p, "usr/share/doc/") {
		return e.typ != tar.TypeReg || path.Base(p) == "copyright"
	}
	return p == "usr/share/locale/locale.alias"
}

// slim removes what slimPrefixes name from t and returns how many entries
// and bytes it removed.
func slim(t *tree) (n int, size int64) {
	for p, e := range t.entries {
		if slices.Contains(slimFiles, p) {
			delete(t.entries, p)
			n++
			size += e.size
			continue
		}
		for _, prefix := range slimPrefixes {
			if strings.HasPrefix(p, prefix) && !slimKeep(p, e) {
				delete(t.entries, p)
				n++
				size += e.size
				break
			}
		}
	}
	return n, size
}
