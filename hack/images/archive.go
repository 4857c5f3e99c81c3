package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of index.json that name an image: containerd's import reads
// the first, OCI tools the second (the tag alone, as Docker writes it).
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// assemble stacks layers (bottom first) into an OCI image for linux/arch
// with the given runtime configuration. Every timestamp is created, and
// each layer's history entry says what made it, so equal inputs give an
// equal image digest.
func assemble(layers []*layer, cfg v1.Config, created time.Time, arch string) (v1.Image, error) {
	t := v1.Time{Time: created.UTC().Truncate(time.Second)}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l, History: v1.History{Created: t, CreatedBy: l.createdBy}}
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = t
	cf.OS, cf.Architecture = "linux", arch
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// parseTags parses image references that must carry a tag
// ("vmkit/virt-handler:devel").
func parseTags(refs []string) ([]name.Tag, error) {
	tags := make([]name.Tag, len(refs))
	for i, r := range refs {
		t, err := name.NewTag(r)
		if err != nil {
			return nil, fmt.Errorf("image reference %q: %w", r, err)
		}
		tags[i] = t
	}
	return tags, nil
}

// fullName is a tag's reference as containerd and the kubelet store it:
// Docker Hub references become docker.io/<repository>:<tag>.
func fullName(t name.Tag) string {
	reg := t.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + t.RepositoryStr() + ":" + t.TagStr()
}

// writeArchive writes img, tagged with each of tags, as a tar file at
// path, atomically. The tar holds an OCI image layout (oci-layout,
// index.json with one entry per tag, blobs/sha256/) and Docker's
// manifest.json over the same blobs, as `docker save` of Docker 25 does:
// `ctr images import`, `docker load` and `podman load` all read it, and
// containerd keeps the manifest digest. Entries are sorted and carry no
// timestamps, so the file is as reproducible as the image.
func writeArchive(path string, img v1.Image, tags []name.Tag) error {
	if len(tags) == 0 {
		return fmt.Errorf("%s: no tags", path)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}

	// blobs by file name; a layer used twice is stored once.
	type blob struct {
		data []byte
		open func() (io.ReadCloser, error)
		size int64
	}
	blobs := map[string]blob{
		blobPath(digest):     {data: manifest, size: int64(len(manifest))},
		blobPath(configName): {data: config, size: int64(len(config))},
	}
	dockerManifest := tarball.Descriptor{Config: blobPath(configName)}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		blobs[blobPath(d)] = blob{open: l.Compressed, size: size}
		dockerManifest.Layers = append(dockerManifest.Layers, blobPath(d))
	}

	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, t := range tags {
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: mt,
			Digest:    digest,
			Size:      int64(len(manifest)),
			Annotations: map[string]string{
				annotationImageName: fullName(t),
				annotationRefName:   t.TagStr(),
			},
		})
		dockerManifest.RepoTags = append(dockerManifest.RepoTags, t.String())
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	manifestJSON, err := json.Marshal(tarball.Manifest{dockerManifest})
	if err != nil {
		return err
	}

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // a no-op after the rename
	}()
	tw := tar.NewWriter(tmp)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(blobs)) {
		b := blobs[p]
		open := b.open
		if open == nil {
			open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.data)), nil }
		}
		if err := copyBlob(tw, p, b.size, open); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"index.json", indexJSON},
		{"manifest.json", manifestJSON},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	} {
		if err := writeTarFile(tw, f.name, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func blobPath(h v1.Hash) string {
	return "blobs/" + h.Algorithm + "/" + h.Hex
}

func copyBlob(tw *tar.Writer, name string, size int64, open func() (io.ReadCloser, error)) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	return writeTarFile(tw, name, size, rc)
}

func writeTarFile(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size}); err != nil {
		return err
	}
	n, err := io.Copy(tw, r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("%s: wrote %d bytes, expected %d", name, n, size)
	}
	return nil
}
