package containerdisk

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of an OCI layout's index.json naming an image: containerd's
// import reads the first, OCI tools the second.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img, tagged tag, to w as a tar holding an OCI image
// layout (oci-layout, index.json, blobs/sha256/) and Docker's
// manifest.json over the same blobs, as `docker save` writes since Docker
// 25: `ctr images import`, `docker load` and `podman load` read it, and
// containerd keeps the manifest digest, the one a registry would have
// (tarball.Write's Docker archive has no manifest, so containerd would
// make one of another digest). The layer is streamed; entries are sorted
// and undated, so equal images give equal archives.
func WriteArchive(w io.Writer, img v1.Image, tag name.Tag) error {
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

	type blob struct {
		open func() (io.ReadCloser, error)
		size int64
	}
	bytesBlob := func(data []byte) blob {
		return blob{open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, size: int64(len(data))}
	}
	blobs := map[string]blob{ // by path; a layer used twice is stored once
		blobPath(digest):     bytesBlob(manifest),
		blobPath(configName): bytesBlob(config),
	}
	docker := tarball.Descriptor{Config: blobPath(configName), RepoTags: []string{tag.String()}}
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
		docker.Layers = append(docker.Layers, blobPath(d))
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt, Digest: digest, Size: int64(len(manifest)),
			Annotations: map[string]string{annotationImageName: containerdName(tag), annotationRefName: tag.TagStr()},
		}},
	})
	if err != nil {
		return err
	}
	dockerManifest, err := json.Marshal(tarball.Manifest{docker})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(blobs)) {
		if err := writeBlob(tw, p, blobs[p].size, blobs[p].open); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"index.json", index},
		{"manifest.json", dockerManifest},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	} {
		if err := writeBlob(tw, f.name, int64(len(f.data)), bytesBlob(f.data).open); err != nil {
			return err
		}
	}
	return tw.Close()
}

// containerdName is a tag as containerd and the kubelet store it: Docker
// Hub's become docker.io/<repository>:<tag>.
func containerdName(t name.Tag) string {
	reg := t.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + t.RepositoryStr() + ":" + t.TagStr()
}

func blobPath(h v1.Hash) string {
	return "blobs/" + h.Algorithm + "/" + h.Hex
}

func writeBlob(tw *tar.Writer, name string, size int64, open func() (io.ReadCloser, error)) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size}); err != nil {
		return err
	}
	n, err := io.Copy(tw, rc)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("%s: %d bytes, want %d", name, n, size)
	}
	return nil
}
