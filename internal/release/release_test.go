package release

import (
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/installstrategy"
	vmapiv1 "github.com/vmkit/vmkit/vmapi/v1"
)

// writeArchive writes a random image for arch as <dir>/<image>.tar tagged
// vmkit/<image>:<tag>, as hack/build-images.sh names it.
func writeArchive(t *testing.T, dir, image, tag, arch string) {
	t.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.NewTag("vmkit/" + image + ":" + tag)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(filepath.Join(dir, image+".tar"), ref, img); err != nil {
		t.Fatal(err)
	}
}

// TestPublish publishes a release of two architectures (virt-launcher on
// amd64 only) to a registry and checks the indexes and the manifests: the
// operator and each component pinned by the digest pushed.
func TestPublish(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	reg := u.Host + "/vmkit"
	dirs := map[string]string{"amd64": filepath.Join(t.TempDir(), "amd64"), "arm64": filepath.Join(t.TempDir(), "arm64")}
	for _, c := range Components {
		writeArchive(t, dirs["amd64"], c, "build", "amd64")
		if c != vmapiv1.VirtLauncherValue {
			writeArchive(t, dirs["arm64"], c, "build", "arm64")
		}
	}
	p, err := Publish(t.Context(), Options{Registry: reg, Version: "v0.1.0", SourceTag: "build", Archives: dirs, Images: Components, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Components {
		want := []string{"amd64", "arm64"}
		if c == vmapiv1.VirtLauncherValue {
			want = []string{"amd64"}
		}
		if !slices.Equal(p.Platforms[c], want) {
			t.Errorf("%s published for %v, want %v", c, p.Platforms[c], want)
		}
		ref, _ := name.ParseReference(reg+"/"+c+":v0.1.0", name.Insecure)
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		d, _ := idx.Digest()
		if d != p.Digests[c] {
			t.Errorf("%s is %s, published as %s", ref, d, p.Digests[c])
		}
		m, _ := idx.IndexManifest()
		var archs []string
		for _, desc := range m.Manifests {
			archs = append(archs, desc.Platform.Architecture)
		}
		if !slices.Equal(archs, want) {
			t.Errorf("%s's index lists %v, want %v", ref, archs, want)
		}
	}

	dir := t.TempDir()
	if err := p.WriteManifests(dir, p.OperatorConfig()); err != nil {
		t.Fatal(err)
	}
	op, err := os.ReadFile(filepath.Join(dir, OperatorManifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"image: " + p.Ref(vmapiv1.VirtOperatorValue),
		installstrategy.EnvVersion + "\n          value: v0.1.0",
		installstrategy.EnvAPIDigest + "\n          value: " + p.Digests[vmapiv1.VirtAPIValue].String(),
		installstrategy.EnvLauncherDigest + "\n          value: " + p.Digests[vmapiv1.VirtLauncherValue].String(),
	} {
		if !strings.Contains(string(op), want) {
			t.Errorf("%s lacks %q", OperatorManifest, want)
		}
	}
	cr, err := os.ReadFile(filepath.Join(dir, CRManifest))
	if err != nil {
		t.Fatal(err)
	}
	kv := &vmapiv1.KubeVirt{}
	if err := yaml.UnmarshalStrict(cr, kv); err != nil || kv.Name != "kubevirt" || kv.Namespace != "kubevirt" {
		t.Errorf("%s: %v\n%s", CRManifest, err, cr)
	}
	images, _ := os.ReadFile(filepath.Join(dir, ImagesFile))
	if !strings.Contains(string(images), p.Ref(vmapiv1.VirtHandlerValue)+" (amd64, arm64)") {
		t.Errorf("%s:\n%s", ImagesFile, images)
	}
}

func TestPublishRefuses(t *testing.T) {
	dir := t.TempDir()
	writeArchive(t, dir, "virt-api", "v1", "arm64")
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Version: "v1", Archives: map[string]string{"amd64": dir}}, "the registry"},
		{Options{Registry: "r.example", Version: "v 1", Archives: map[string]string{"amd64": dir}}, "do not make an image reference"},
		{Options{Registry: "r.example", Version: "v1"}, "no image archives"},
		{Options{Registry: "r.example", Version: "v1", Archives: map[string]string{"amd64": dir}, Images: []string{"virt-api"}}, "is for linux/arm64, listed as linux/amd64"},
		{Options{Registry: "r.example", Version: "v1", Archives: map[string]string{"amd64": dir}, Images: []string{"virt-nope"}}, "no archive of image virt-nope"},
	} {
		if _, err := Publish(t.Context(), tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Publish(%+v): %v, want an error with %q", tt.o, err, tt.want)
		}
	}
}
