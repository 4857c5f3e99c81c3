// Package release publishes a vmkit release to an OCI registry (`make
// release`, hack/release.sh, and the local cluster's installation, which
// installs exactly as a platform team does): each image of the release as a
// multi-architecture index (one image per architecture built by
// hack/build-images.sh), pushed under <registry>/<name>:<version>, and the
// release manifests, kubevirt-operator.yaml and kubevirt-cr.yaml, which pin
// the operator and every component by the digest pushed.
package release

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/vmkit/vmkit/installstrategy"
	vmapiv1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Components are the images virt-operator installs from (the operator's
// own first).
var Components = []string{vmapiv1.VirtOperatorValue, vmapiv1.VirtAPIValue, vmapiv1.VirtControllerValue, vmapiv1.VirtHandlerValue, vmapiv1.VirtLauncherValue, installstrategy.ExportServerComponent}

// Disks are the container-disk images a release carries besides the
// components: the test guests, for users to try a VM with.
var Disks = []string{"tiny-guest", "cloud-guest"}

// Manifest file names, KubeVirt's.
const (
	OperatorManifest = "kubevirt-operator.yaml"
	CRManifest       = "kubevirt-cr.yaml"
	ImagesFile       = "images.txt"
)

// Options say what to publish where.
type Options struct {
	// Registry is where the images go: host[:port][/path], e.g.
	// registry.example.com/vmkit. Image <name> becomes
	// <Registry>/<name>:<Version>.
	Registry string
	// Version tags every image, e.g. v0.1.0.
	Version string
	// Archives maps an architecture (amd64, arm64) to the directory of its
	// image archives (<name>.tar, as hack/build-images.sh writes them).
	Archives map[string]string
	// SourceTag is the tag the archives' images carry (vmkit/<name>:<tag>;
	// hack/build-images.sh's TAG); default Version.
	SourceTag string
	// Images to publish (default Components and Disks). An image missing
	// from an architecture's directory is published without that
	// architecture; one missing from every directory is an error.
	Images []string
	// Insecure talks plain HTTP to the registry (a registry on 127.0.0.1
	// or localhost always is).
	Insecure bool
	// Keychain gives the registry's credentials (default
	// authn.DefaultKeychain: docker login's and podman login's files).
	Keychain authn.Keychain
	// Log, when set, gets a line per image pushed.
	Log io.Writer
}

// Published is a release in a registry.
type Published struct {
	Registry, Version string
	// Digests are the pushed indexes' digests, by image name.
	Digests map[string]v1.Hash
	// Platforms lists each image's architectures.
	Platforms map[string][]string
}

// Ref is image name's reference by digest.
func (p *Published) Ref(image string) string {
	return p.Registry + "/" + image + "@" + p.Digests[image].String()
}

// Publish pushes the images of o to o.Registry, each as an index of its
// architectures.
func Publish(ctx context.Context, o Options) (*Published, error) {
	if o.Registry == "" || o.Version == "" {
		return nil, fmt.Errorf("release: the registry (%q) and the version (%q) must be set", o.Registry, o.Version)
	}
	if _, err := name.NewTag(o.Registry + "/virt-operator:" + o.Version); err != nil {
		return nil, fmt.Errorf("release: registry %q and version %q do not make an image reference: %w", o.Registry, o.Version, err)
	}
	if len(o.Archives) == 0 {
		return nil, fmt.Errorf("release: no image archives (Options.Archives)")
	}
	if o.SourceTag == "" {
		o.SourceTag = o.Version
	}
	if o.Images == nil {
		o.Images = append(slices.Clone(Components), Disks...)
	}
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	p := &Published{Registry: o.Registry, Version: o.Version, Digests: map[string]v1.Hash{}, Platforms: map[string][]string{}}
	for _, image := range o.Images {
		idx, archs, err := o.index(image)
		if err != nil {
			return nil, err
		}
		ref, err := o.reference(image + ":" + o.Version)
		if err != nil {
			return nil, err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain)); err != nil {
			return nil, fmt.Errorf("release: pushing %s: %w", ref, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		p.Digests[image], p.Platforms[image] = d, archs
		if o.Log != nil {
			fmt.Fprintf(o.Log, "release: %s@%s (%s)\n", ref, d, strings.Join(archs, ", "))
		}
	}
	return p, nil
}

// reference parses s (<name>:<tag> under the registry), plain HTTP when
// asked or on the loopback.
func (o *Options) reference(s string) (name.Reference, error) {
	var opts []name.Option
	host, _, _ := strings.Cut(o.Registry, "/")
	if o.Insecure || strings.HasPrefix(host, "127.") || strings.HasPrefix(host, "localhost") || strings.HasPrefix(host, "[::1]") {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(o.Registry+"/"+s, opts...)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return ref, nil
}

// index makes image's index from the archives of every architecture.
func (o *Options) index(image string) (v1.ImageIndex, []string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var archs []string
	for _, arch := range slices.Sorted(maps.Keys(o.Archives)) {
		file := filepath.Join(o.Archives[arch], image+".tar")
		if _, err := os.Stat(file); err != nil {
			continue
		}
		tag, err := name.NewTag("vmkit/" + image + ":" + o.SourceTag)
		if err != nil {
			return nil, nil, err
		}
		img, err := tarball.Image(func() (io.ReadCloser, error) { return os.Open(file) }, &tag)
		if err != nil {
			return nil, nil, fmt.Errorf("release: %s: %s: %w", file, tag, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, fmt.Errorf("release: %s: %w", file, err)
		}
		if cf.Architecture != arch || cf.OS != "linux" {
			return nil, nil, fmt.Errorf("release: %s is for %s/%s, listed as linux/%s", file, cf.OS, cf.Architecture, arch)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
		archs = append(archs, arch)
	}
	if len(archs) == 0 {
		return nil, nil, fmt.Errorf("release: no archive of image %s in %v", image, slices.Collect(maps.Values(o.Archives)))
	}
	return idx, archs, nil
}

// OperatorConfig is the operator's installation of the release: the
// operator by digest, KUBEVIRT_VERSION, and the other components' digests,
// so that every node runs exactly the images published.
func (p *Published) OperatorConfig() installstrategy.OperatorConfig {
	cfg := installstrategy.OperatorConfig{
		Image:           p.Ref(vmapiv1.VirtOperatorValue),
		Version:         p.Version,
		ImagePullPolicy: "IfNotPresent",
		Digests:         map[string]string{},
	}
	for component := range installstrategy.DigestEnv {
		if d, ok := p.Digests[component]; ok {
			cfg.Digests[component] = d.String()
		}
	}
	return cfg
}

// WriteManifests writes the release manifests into dir: the operator's own
// installation (OperatorManifest, from cfg, usually OperatorConfig's), the
// default KubeVirt CR (CRManifest) and the list of images by digest
// (ImagesFile).
func (p *Published) WriteManifests(dir string, cfg installstrategy.OperatorConfig) error {
	op, err := installstrategy.OperatorManifest(cfg)
	if err != nil {
		return err
	}
	cr, err := installstrategy.KubeVirtManifest(installstrategy.DefaultKubeVirt(cfg.Namespace))
	if err != nil {
		return err
	}
	var images strings.Builder
	for _, image := range slices.Sorted(maps.Keys(p.Digests)) {
		fmt.Fprintf(&images, "%s:%s %s (%s)\n", p.Registry+"/"+image, p.Version, p.Ref(image), strings.Join(p.Platforms[image], ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for file, data := range map[string][]byte{OperatorManifest: op, CRManifest: cr, ImagesFile: []byte(images.String())} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
