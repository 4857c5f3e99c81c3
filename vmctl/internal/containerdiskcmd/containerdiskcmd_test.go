package containerdiskcmd

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestDefaultArchiveTag(t *testing.T) {
	for _, tc := range []struct{ diskName, path, want string }{
		{"", "/x/fedora.qcow2", "containerdisk/fedora:latest"},
		{"", "Debian_12 (cloud).IMG", "containerdisk/debian_12--cloud:latest"},
		{"rhel.raw", "/x/other.qcow2", "containerdisk/rhel:latest"},
		{"", "/x/.qcow2", "containerdisk/disk:latest"},
	} {
		if got := defaultArchiveTag(tc.diskName, tc.path); got != tc.want {
			t.Errorf("defaultArchiveTag(%q, %q) = %q, want %q", tc.diskName, tc.path, got, tc.want)
		}
		if _, err := name.NewTag(defaultArchiveTag(tc.diskName, tc.path)); err != nil {
			t.Errorf("%q: %v", tc.path, err)
		}
	}
}

func TestPinned(t *testing.T) {
	digest := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	for image, want := range map[string]string{
		"quay.io/me/fedora:41":     "quay.io/me/fedora@" + digest.String(),
		"quay.io/me/fedora":        "quay.io/me/fedora@" + digest.String(),
		"fedora:latest":            "fedora@" + digest.String(),
		"localhost:5000/disk":      "localhost:5000/disk@" + digest.String(),
		"localhost:5000/disk:5000": "localhost:5000/disk@" + digest.String(),
	} {
		tag, err := parsePushReference(image, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := pinned(image, tag, digest); got != want {
			t.Errorf("pinned(%q) = %q, want %q", image, got, want)
		}
	}
}
