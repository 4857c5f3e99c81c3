package main

import (
	"archive/tar"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPasswdAndGroup(t *testing.T) {
	users := []user{{Name: "root", UID: 0, Home: "/root"}, {Name: "libvirt-qemu", UID: 107, Home: "/var/lib/libvirt"}}
	groups := []group{{Name: "root", GID: 0}, {Name: "kvm", GID: 36, Members: []string{"libvirt-qemu", "other"}}}
	wantPasswd := "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"libvirt-qemu:x:107:107:libvirt-qemu:/var/lib/libvirt:/usr/sbin/nologin\n"
	wantGroup := "root:x:0:\nkvm:x:36:libvirt-qemu,other\n"
	if diff := cmp.Diff(wantPasswd, string(passwdFile(users))); diff != "" {
		t.Errorf("passwd (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantGroup, string(groupFile(groups))); diff != "" {
		t.Errorf("group (-want +got):\n%s", diff)
	}
}

// accounts parses /etc/passwd or /etc/group into name → id.
func accounts(t *testing.T, file []byte) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSuffix(string(file), "\n"), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 7 && len(f) != 4 {
			t.Fatalf("malformed line %q", line)
		}
		if _, dup := out[f[0]]; dup {
			t.Errorf("%s is listed twice", f[0])
		}
		out[f[0]] = f[2]
	}
	return out
}

// TestImageUsers checks the accounts the pods rely on: virt-operator and
// virt-controller run as a numeric non-root user, the launcher pod's
// helpers as podtemplate's 107, and libvirt needs libvirt-qemu and the
// kvm, libvirt-qemu and libvirt groups.
func TestImageUsers(t *testing.T) {
	base, launcher := newTree(), newTree()
	addAccounts(base, baseUsers, baseGroups)
	addLauncherConfig(launcher)

	for _, tc := range []struct {
		tree   *tree
		file   string
		wantID map[string]string
	}{
		{base, "etc/passwd", map[string]string{"root": "0", "vmkit": "1001", "qemu": "107"}},
		{base, "etc/group", map[string]string{"root": "0", "vmkit": "1001", "qemu": "107"}},
		{launcher, "etc/passwd", map[string]string{"root": "0", "libvirt-qemu": "107"}},
		{launcher, "etc/group", map[string]string{"root": "0", "kvm": "36", "libvirt-qemu": "107", "libvirt": "108"}},
	} {
		e, ok := tc.tree.entries[tc.file]
		if !ok || e.typ != tar.TypeReg || e.mode != 0o644 {
			t.Fatalf("%s: got %+v, want a 0644 file", tc.file, e)
		}
		got := accounts(t, e.data)
		for name, id := range tc.wantID {
			if got[name] != id {
				t.Errorf("%s: %s has id %q, want %q", tc.file, name, got[name], id)
			}
		}
	}
	for _, tr := range []*tree{base, launcher} {
		for p, mode := range map[string]int64{"tmp": 0o1777, "var/tmp": 0o1777} {
			if e := tr.entries[p]; e.typ != tar.TypeDir || e.mode != mode {
				t.Errorf("%s: got %+v, want a directory with mode %o", p, e, mode)
			}
		}
	}
}

// confSettings parses libvirt's "key = value" configuration lines.
func confSettings(t *testing.T, conf string) map[string]string {
	t.Helper()
	line := regexp.MustCompile(`^([a-z_]+) = (.+)$`)
	out := make(map[string]string)
	for _, l := range strings.Split(conf, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a libvirt setting: %q", l)
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s is set twice", m[1])
		}
		out[m[1]] = m[2]
	}
	return out
}

func TestLauncherConfig(t *testing.T) {
	tr := newTree()
	addLauncherConfig(tr)
	want := map[string]map[string]string{
		"etc/libvirt/qemu.conf": {
			"user": `"root"`, "group": `"root"`, "dynamic_ownership": "0", "remember_owner": "0",
			"cgroup_controllers": "[ ]", "namespaces": "[ ]", "security_driver": `"none"`,
			"stdio_handler": `"logd"`,
		},
		"etc/libvirt/libvirtd.conf": {
			"listen_tcp": "0", "listen_tls": "0", "auth_unix_rw": `"none"`, "auth_unix_ro": `"none"`,
			"log_outputs": `"3:stderr"`,
		},
	}
	for file, settings := range want {
		e, ok := tr.entries[file]
		if !ok {
			t.Fatalf("%s is missing", file)
		}
		got := confSettings(t, string(e.data))
		for k, v := range settings {
			if got[k] != v {
				t.Errorf("%s: %s = %s, want %s", file, k, got[k], v)
			}
		}
	}
	for _, d := range []string{"run/libvirt", "var/lib/libvirt/qemu", "var/log/libvirt/qemu", "var/cache/libvirt/qemu"} {
		if tr.entries[d].typ != tar.TypeDir {
			t.Errorf("%s is not a directory", d)
		}
	}
	if e := tr.entries["var/lib/libvirt/qemu/nvram"]; e.typ != tar.TypeDir || e.mode != 0o1777 {
		t.Errorf("var/lib/libvirt/qemu/nvram: got %+v, want a directory with mode 1777 (a non-root QEMU writes EFI variable stores there)", e)
	}
	if e := tr.entries["var/run"]; e.typ != tar.TypeSymlink || e.target != "/run" {
		t.Errorf("var/run: got %+v, want a symlink to /run", e)
	}
	if _, err := withParents(tr.entries); err != nil {
		t.Errorf("the launcher configuration is not a valid layer: %v", err)
	}
}

func TestMergedUsrAliases(t *testing.T) {
	tr := newTree()
	tr.File("bin/cp", 0o755, []byte("cp"))
	tr.Symlink("bin/sh", "dash")
	tr.Dir("bin/subdir", 0o755)
	tr.File("bin/subdir/x", 0o755, nil)
	tr.File("usr/bin/env", 0o755, []byte("env"))
	tr.File("bin/env", 0o755, []byte("old env"))
	tr.File("sbin/ldconfig", 0o755, nil)
	if n := addMergedUsrAliases(tr); n != 3 {
		t.Errorf("added %d aliases, want 3", n)
	}
	for alias, target := range map[string]string{
		"usr/bin/cp": "../../bin/cp", "usr/bin/sh": "../../bin/sh", "usr/sbin/ldconfig": "../../sbin/ldconfig",
	} {
		if e := tr.entries[alias]; e.typ != tar.TypeSymlink || e.target != target {
			t.Errorf("%s: got %+v, want a symlink to %s", alias, e, target)
		}
	}
	if e := tr.entries["usr/bin/env"]; e.typ != tar.TypeReg || string(e.data) != "env" {
		t.Errorf("usr/bin/env was replaced: %+v", e)
	}
	if _, ok := tr.entries["usr/bin/subdir"]; ok {
		t.Error("a directory got an alias")
	}
}

func TestSlim(t *testing.T) {
	tr := newTree()
	keep := []string{"usr/share/doc/libc6/copyright", "usr/share/doc/libc6", "usr/share/doc/libfoo",
		"usr/share/locale/locale.alias", "usr/share/qemu/bios.bin", "usr/lib/locale/C.utf8/LC_CTYPE"}
	drop := []string{"usr/share/doc/libc6/changelog.Debian.gz", "usr/share/man/man1/cp.1.gz",
		"usr/share/locale/de/LC_MESSAGES/coreutils.mo", "usr/share/info/coreutils.info.gz",
		"usr/share/lintian/overrides/libc6"}
	for _, p := range slices.Concat(keep, drop) {
		tr.File(p, 0o644, []byte("12345"))
	}
	tr.Dir("usr/share/doc/libc6", 0o755)
	tr.Symlink("usr/share/doc/libfoo", "libc6")
	n, size := slim(tr)
	if n != len(drop) || size != int64(5*len(drop)) {
		t.Errorf("slim removed %d entries, %d bytes; want %d, %d", n, size, len(drop), 5*len(drop))
	}
	for _, p := range keep {
		if _, ok := tr.entries[p]; !ok {
			t.Errorf("%s was removed", p)
		}
	}
	for _, p := range drop {
		if _, ok := tr.entries[p]; ok {
			t.Errorf("%s was kept", p)
		}
	}
}
