// Package registry runs the local cluster's OCI registry (the distribution
// project's registry, built by hack/build-registry.sh) and fills it: image
// archives (hack/build-images.sh writes them) are pushed into it, and every
// node's containerd is pointed at it for the registry names manifests use
// (docker.io, quay.io, registry.k8s.io, ...), so that pods pull their images
// as on any cluster, pull policies included. internal/testenv runs it with
// the nodes; `make demo` prints its address.
//
// The registry keeps one namespace: an image pushed as
// 127.0.0.1:5000/kubevirt/cirros-container-disk-demo:latest is what
// quay.io/kubevirt/cirros-container-disk-demo:latest and
// docker.io/kubevirt/cirros-container-disk-demo:latest resolve to on the
// nodes.
package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultAddr is where the local cluster's registry listens: plain HTTP on
// the loopback address, which every node of this machine shares (they run in
// the host's network namespace).
const DefaultAddr = "127.0.0.1:5000"

// BinaryEnv, when set, is the registry binary's path.
const BinaryEnv = "VMKIT_REGISTRY_BIN"

// Mirrored are the registry names whose pulls the nodes send to the local
// registry (besides its own address).
var Mirrored = []string{"docker.io", "quay.io", "registry.k8s.io", "ghcr.io", "gcr.io", "k8s.gcr.io"}

// Binary returns the registry binary: $VMKIT_REGISTRY_BIN, else
// <root>/_output/bin/registry, or an error naming the command that builds it.
func Binary(root string) (string, error) {
	p := os.Getenv(BinaryEnv)
	if p == "" {
		p = filepath.Join(root, "_output", "bin", "registry")
	}
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("the OCI registry binary %s is missing: build it with `hack/build-registry.sh` (run by `make test-deps`)", p)
	}
	return p, nil
}

// WriteConfig writes the registry's configuration to file: listening on
// addr (plain HTTP), blobs under dataDir, deletes allowed (so that tags and
// manifests can be removed as on any registry), access log off.
func WriteConfig(file, addr, dataDir string) error {
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %q
  # One registry process: the secret only signs upload state.
  secret: vmkit-local-registry
`, dataDir, addr)
	return os.WriteFile(file, []byte(cfg), 0o644)
}

// Ready reports whether the registry at addr answers the distribution API's
// version check (GET /v2/ with 200).
func Ready(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET http://%s/v2/: %s", addr, resp.Status)
	}
	return nil
}

// WriteHostsConfig writes containerd's registry host configuration under dir
// (the CRI plugin's registry config_path): for addr itself and for each of
// names, a hosts.toml that sends pulls and resolves to the registry at addr
// over plain HTTP, with no fallback to the upstream registry.
func WriteHostsConfig(dir, addr string, names []string) error {
	hosts := fmt.Sprintf(`# Written by vmkit's internal/registry: pulls go to the local registry.
server = "http://%s"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, addr, addr)
	for _, n := range append([]string{addr}, names...) {
		d := filepath.Join(dir, n)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Pushed is one image reference written to the registry.
type Pushed struct {
	// Source is the reference in the archive (vmkit/virt-api:devel).
	Source string
	// Ref is where it went (127.0.0.1:5000/vmkit/virt-api:devel).
	Ref string
	// Digest is the manifest's digest.
	Digest v1.Hash
}

// Local is the reference src (any registry) has in the registry at addr:
// the same repository and tag or digest.
func Local(addr, src string) (string, error) {
	ref, err := name.ParseReference(src)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", src, err)
	}
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	return addr + "/" + ref.Context().RepositoryStr() + sep + ref.Identifier(), nil
}

// PushArchives pushes every tagged image of each archive (what `docker save`
// writes, with manifest.json) to the registry at addr, under its repository
// and tag (Local). Blobs the registry has are not sent again.
func PushArchives(ctx context.Context, addr string, archives ...string) ([]Pushed, error) {
	var out []Pushed
	for _, a := range archives {
		opener := func() (io.ReadCloser, error) { return os.Open(a) }
		manifest, err := tarball.LoadManifest(opener)
		if err != nil {
			return out, fmt.Errorf("reading image archive %s: %w", a, err)
		}
		var tags []string
		for _, d := range manifest {
			tags = append(tags, d.RepoTags...)
		}
		if len(tags) == 0 {
			return out, fmt.Errorf("image archive %s: no tagged image in its manifest.json", a)
		}
		for _, src := range slices.Compact(slices.Sorted(slices.Values(tags))) {
			tag, err := name.NewTag(src)
			if err != nil {
				return out, fmt.Errorf("image archive %s: tag %q: %w", a, src, err)
			}
			img, err := tarball.Image(opener, &tag)
			if err != nil {
				return out, fmt.Errorf("image archive %s: %s: %w", a, src, err)
			}
			p, err := push(ctx, addr, src, img)
			if err != nil {
				return out, fmt.Errorf("image archive %s: %w", a, err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// push writes img to the registry at addr under src's repository and tag.
func push(ctx context.Context, addr, src string, img v1.Image) (Pushed, error) {
	local, err := Local(addr, src)
	if err != nil {
		return Pushed{}, err
	}
	dst, err := name.ParseReference(local, name.Insecure)
	if err != nil {
		return Pushed{}, err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return Pushed{}, fmt.Errorf("pushing %s to %s: %w", src, local, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Pushed{}, err
	}
	return Pushed{Source: src, Ref: local, Digest: digest}, nil
}

// Copy copies the image or index src to dst (references with registries;
// plain HTTP for both), as `crane copy` does: a new tag for a release
// candidate, or an image moved between registries.
func Copy(ctx context.Context, src, dst string) error {
	s, err := name.ParseReference(src, name.Insecure)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", src, err)
	}
	d, err := name.ParseReference(dst, name.Insecure)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", dst, err)
	}
	desc, err := remote.Get(s, remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return err
		}
		return remote.WriteIndex(d, idx, remote.WithContext(ctx))
	}
	img, err := desc.Image()
	if err != nil {
		return err
	}
	if err := remote.Write(d, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}
