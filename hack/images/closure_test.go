package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// dependsSnippet is `apt-cache depends --recurse --no-recommends ...` on
// Debian 12, cut down: an alternative (debconf | debconf-2.0) whose second
// branch is virtual, a real package with a provider listed below it
// (libsystemd0, provided by libelogind0 too), a package listed twice, and
// PreDepends.
const dependsSnippet = `libsemanage2
  Depends: libsemanage-common
  Depends: libc6
libsemanage-common
passwd
  Depends: libc6
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  PreDepends: libsemanage2
libc6
  Depends: libgcc-s1
libdbus-1-3
  Depends: libc6
  Depends: libsystemd0
    libelogind0
libgcc-s1
  Depends: gcc-12-base
  Depends: libc6
passwd
  Depends: libc6
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  PreDepends: libsemanage2
gcc-12-base
debconf
libsystemd0
  Depends: libc6
libelogind0
  Depends: libc6
  Depends: libudev1
libudev1
  Depends: libc6
cdebconf
  Depends: libc6
  Depends: libnewt0.52
libnewt0.52
  Depends: libc6
<debconf-2.0>
    cdebconf
    debconf
`

func TestClosure(t *testing.T) {
	g, err := parseDepends(dependsSnippet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		roots   []string
		exclude []string
		want    []string
	}{{
		name:  "first real alternative, real package over its providers",
		roots: []string{"passwd", "libdbus-1-3"},
		want: []string{"debconf", "gcc-12-base", "libc6", "libdbus-1-3", "libgcc-s1",
			"libsemanage-common", "libsemanage2", "libsystemd0", "passwd"},
	}, {
		name:    "excluded packages are neither taken nor followed",
		roots:   []string{"passwd"},
		exclude: []string{"debconf", "libgcc-s1"},
		want:    []string{"libc6", "libsemanage-common", "libsemanage2", "passwd"},
	}, {
		name:  "a root that is reached again counts once",
		roots: []string{"libc6", "libgcc-s1", "libc6"},
		want:  []string{"gcc-12-base", "libc6", "libgcc-s1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := g.closure(tc.roots, tc.exclude, "amd64")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("closure(%v) (-want +got):\n%s", tc.roots, diff)
			}
		})
	}
}

func TestClosureVirtualOnly(t *testing.T) {
	const out = `tool
  Depends: <awk>
    mawk
    gawk
  Depends: <mail-transport-agent>
    exim4:i386
    postfix
  Depends: libc6:amd64
mawk
gawk
postfix
libc6
`
	g, err := parseDepends(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.closure([]string{"gawk", "tool"}, nil, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	// gawk is taken already and provides awk; exim4 is another
	// architecture's; libc6:amd64 is the native libc6.
	if diff := cmp.Diff([]string{"gawk", "libc6", "postfix", "tool"}, got); diff != "" {
		t.Errorf("closure (-want +got):\n%s", diff)
	}
}

func TestClosureErrors(t *testing.T) {
	for _, tc := range []struct {
		name, out, root, wantErr string
	}{
		{"unknown root", "a\n", "b", "does not list package b"},
		{"unsatisfiable", "a\n  Depends: <v>\n", "a", "nothing satisfies <v>"},
		{"only a foreign architecture", "a\n  Depends: b:i386\nb\n", "a", "nothing satisfies b:i386"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseDepends(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.closure([]string{tc.root}, nil, "amd64")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("closure: got error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseDependsErrors(t *testing.T) {
	for _, tc := range []struct{ name, out, wantErr string }{
		{"dependency before any package", "  Depends: a\n", "comes before any package"},
		{"no relation", "a\n  libc6\n", "cannot parse"},
		{"unfinished alternatives", "a\n |Depends: b\n", "ends among the alternatives"},
		{"package among alternatives", "a\n |Depends: b\nc\n", "starts before the alternatives"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDepends(tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseDepends: got error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestLauncherClosureGolden resolves the launcher's packages from a capture
// of apt-cache depends on Debian 12 (testdata/apt-cache-depends.txt); the
// golden list is what the image held then. Regenerate with -update.
func TestLauncherClosureGolden(t *testing.T) {
	out, err := os.ReadFile(filepath.Join("testdata", "apt-cache-depends.txt"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseDepends(string(out))
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := g.closure(launcherPackages, nil, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(pkgs, "\n") + "\n"
	golden := filepath.Join("testdata", "launcher-packages.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("launcher packages (-want +got):\n%s", diff)
	}
	for _, p := range []string{"cdebconf", "libelogind0"} {
		if strings.Contains(got, "\n"+p+"\n") {
			t.Errorf("%s is only a second choice and must not be taken", p)
		}
	}
}

func TestParsePrintURIs(t *testing.T) {
	const out = `'http://deb.debian.org/debian/pool/main/c/coreutils/coreutils_9.1-1_amd64.deb' coreutils_9.1-1_amd64.deb 2896560 SHA256:61038f857e346e8500adf53a2a0a20859f4d3a3b51570cc876b153a2d51a3091
'http://deb.debian.org/debian/pool/main/q/qemu/qemu-system-data_7.2%2bdfsg-7%2bdeb12u18_all.deb' qemu-system-data_1%3a7.2+dfsg-7+deb12u18_all.deb 1297476 SHA256:8d7647370573fe9871949acf60d0c000546c2c089008a70accb3d015781e6bf1
`
	got, err := parsePrintURIs(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []debFile{{
		Package: "coreutils",
		URI:     "http://deb.debian.org/debian/pool/main/c/coreutils/coreutils_9.1-1_amd64.deb",
		File:    "coreutils_9.1-1_amd64.deb",
		Size:    2896560,
		SHA256:  "61038f857e346e8500adf53a2a0a20859f4d3a3b51570cc876b153a2d51a3091",
	}, {
		Package: "qemu-system-data",
		URI:     "http://deb.debian.org/debian/pool/main/q/qemu/qemu-system-data_7.2%2bdfsg-7%2bdeb12u18_all.deb",
		File:    "qemu-system-data_1%3a7.2+dfsg-7+deb12u18_all.deb",
		Size:    1297476,
		SHA256:  "8d7647370573fe9871949acf60d0c000546c2c089008a70accb3d015781e6bf1",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsePrintURIs (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"'u' a_1_amd64.deb 12\n",                    // no checksum
		"'u' ../a_1_amd64.deb 12 SHA256:00\n",       // a path
		"'u' a_1_amd64.deb twelve SHA256:00\n",      // size
		"'u' nounderscore.deb 12 SHA256:00\n",       // no package name
		"'u' a_1_amd64.deb 12 MD5Sum:00\n",          // other checksum
		"'u' a_1_amd64.tar 12 SHA256:00\n",          // not a .deb
		"'u' a_1_amd64.deb 12 SHA256:00 trailing\n", // extra field
		"'u' _1_amd64.deb 12 SHA256:00\n",           // empty package name
		"E: Unable to locate package nonexistent\n", // an error apt printed on stdout
		"'u' a_1_amd64.deb -12 SHA256:00\n",         // negative size
	} {
		if _, err := parsePrintURIs(bad); err == nil {
			t.Errorf("parsePrintURIs(%q) succeeded", bad)
		}
	}
}

func TestControlField(t *testing.T) {
	const control = "Package: libc6\nSource: glibc\nVersion: 2.36-9+deb12u14\nDescription: GNU C Library\n Package: not a field\n"
	for _, tc := range []struct {
		field, want string
		ok          bool
	}{{"Package", "libc6", true}, {"Version", "2.36-9+deb12u14", true}, {"Depends", "", false}} {
		got, ok := controlField(control, tc.field)
		if got != tc.want || ok != tc.ok {
			t.Errorf("controlField(%s) = %q, %v; want %q, %v", tc.field, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseDepends(f *testing.F) {
	f.Add(dependsSnippet)
	f.Add("a\n |Depends: b\n  Depends: <c>\n    d\nb\nd\n")
	f.Fuzz(func(t *testing.T, out string) {
		g, err := parseDepends(out)
		if err != nil {
			return
		}
		for p := range g.deps {
			pkgs, err := g.closure([]string{p}, nil, "amd64")
			if err != nil {
				continue
			}
			found := false
			for _, q := range pkgs {
				if _, ok := g.deps[q]; !ok {
					t.Fatalf("closure of %s holds %s, which apt did not list", p, q)
				}
				found = found || q == p
			}
			if !found {
				t.Fatalf("closure of %s lacks %s itself", p, p)
			}
		}
	})
}
