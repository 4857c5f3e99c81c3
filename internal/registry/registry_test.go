package registry

import (
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestLocal(t *testing.T) {
	for src, want := range map[string]string{
		"vmkit/virt-api:devel":                        "127.0.0.1:5000/vmkit/virt-api:devel",
		"registry.k8s.io/pause:3.10":                  "127.0.0.1:5000/pause:3.10",
		"quay.io/kubevirt/cirros-container-disk-demo": "127.0.0.1:5000/kubevirt/cirros-container-disk-demo:latest",
		"busybox": "127.0.0.1:5000/library/busybox:latest",
		"quay.io/a/b@sha256:" + strings.Repeat("0", 64): "127.0.0.1:5000/a/b@sha256:" + strings.Repeat("0", 64),
	} {
		got, err := Local("127.0.0.1:5000", src)
		if err != nil || got != want {
			t.Errorf("Local(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
	if _, err := Local("127.0.0.1:5000", "UPPER/case"); err == nil {
		t.Error("Local accepted an invalid reference")
	}
}

// TestPushArchives pushes an archive with two tags to a registry and reads
// both back by the digest the push reported; a second push sends nothing new
// and reports the same digest.
func TestPushArchives(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	addr := u.Host

	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "img.tar")
	t1, _ := name.NewTag("vmkit/thing:v1")
	t2, _ := name.NewTag("quay.io/other/thing:latest")
	if err := tarball.MultiRefWriteToFile(archive, map[name.Reference]v1.Image{t1: img, t2: img}); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	for range 2 {
		pushed, err := PushArchives(t.Context(), addr, archive)
		if err != nil {
			t.Fatal(err)
		}
		if len(pushed) != 2 {
			t.Fatalf("pushed %d references, want 2: %+v", len(pushed), pushed)
		}
		for _, p := range pushed {
			if p.Digest != want {
				t.Errorf("%s pushed with digest %s, want %s", p.Ref, p.Digest, want)
			}
			ref, _ := name.ParseReference(p.Ref, name.Insecure)
			got, err := remote.Image(ref)
			if err != nil {
				t.Fatalf("reading back %s: %v", p.Ref, err)
			}
			if d, _ := got.Digest(); d != want {
				t.Errorf("%s holds %s, want %s", p.Ref, d, want)
			}
		}
	}
	if _, err := PushArchives(t.Context(), addr, filepath.Join(t.TempDir(), "missing.tar")); err == nil || !strings.Contains(err.Error(), "missing.tar") {
		t.Errorf("a missing archive: %v, want an error naming it", err)
	}
}

func TestWriteHostsConfig(t *testing.T) {
	dir := t.TempDir()
	if err := WriteHostsConfig(dir, "127.0.0.1:5000", []string{"docker.io", "quay.io"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"127.0.0.1:5000", "docker.io", "quay.io"} {
		data, err := os.ReadFile(filepath.Join(dir, n, "hosts.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `server = "http://127.0.0.1:5000"`) || !strings.Contains(string(data), `capabilities = ["pull", "resolve"]`) {
			t.Errorf("%s/hosts.toml:\n%s", n, data)
		}
	}
}
