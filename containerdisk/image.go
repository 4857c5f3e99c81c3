package containerdisk

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The owner and modes of KubeVirt's container-disk layout.
const (
	// Dir is the directory holding the disk, at the image's root.
	Dir = "disk"
	// UID and GID own Dir and the disk: the qemu user and group (107) of
	// the launcher pod's container-disk containers.
	UID, GID = 107, 107
	// DirMode and FileMode are the modes of Dir and of the disk.
	DirMode, FileMode = 0o555, 0o440
)

// Architectures are the CPU architectures an image may be made for, as
// Go and OCI name them.
var Architectures = []string{"amd64", "arm64", "s390x"}

// Options configure Image. The zero value makes an amd64 image dated at
// the Unix epoch, with the file under its own base name.
type Options struct {
	// Name is the disk's file name in the image, under /disk/; default:
	// the base name of the disk's path. It may not contain a slash.
	Name string
	// Architecture is the image's CPU architecture: amd64 (the default),
	// arm64 or s390x.
	Architecture string
	// Created is the time of the tar entries and of the image's
	// configuration, truncated to the second; default: the Unix epoch.
	// SourceDateEpoch reads SOURCE_DATE_EPOCH.
	Created time.Time
}

// Image returns the container disk image holding disk at /disk/<name>: one
// gzip layer, OCI media types, os linux. It reads the file once, to
// compute the layer's digests; pushing or writing the image reads it
// again (never whole into memory).
func Image(disk Disk, opts Options) (v1.Image, error) {
	name, err := diskName(disk, opts.Name)
	if err != nil {
		return nil, err
	}
	arch, err := architecture(opts.Architecture)
	if err != nil {
		return nil, err
	}
	created := opts.Created.Truncate(time.Second).UTC()
	if opts.Created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	layer, err := newDiskLayer(disk, name, created)
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: fmt.Sprintf("containerdisk: /%s/%s (%s, %d bytes, owner %d:%d, mode %04o)", Dir, name, disk.Format, disk.Size, UID, GID, FileMode),
		},
	})
}

// diskName is the disk's name in the image: name, else the base name of
// its path.
func diskName(disk Disk, name string) (string, error) {
	if name == "" {
		name = filepath.Base(disk.Path)
	}
	switch {
	case name == "." || name == ".." || name == "/":
		return "", fmt.Errorf("disk name %q: must be a file name", name)
	case strings.ContainsAny(name, "/\x00"):
		return "", fmt.Errorf("disk name %q: must be a file name, without a slash", name)
	}
	return name, nil
}

// architecture is arch checked, amd64 when empty.
func architecture(arch string) (string, error) {
	if arch == "" {
		return "amd64", nil
	}
	for _, a := range Architectures {
		if arch == a {
			return arch, nil
		}
	}
	return "", fmt.Errorf("architecture %q is not supported: use %s", arch, strings.Join(Architectures, ", "))
}

// SourceDateEpoch is the time a SOURCE_DATE_EPOCH value (seconds since the
// Unix epoch, https://reproducible-builds.org/specs/source-date-epoch/)
// names; an empty value is the Unix epoch.
func SourceDateEpoch(value string) (time.Time, error) {
	if value == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(value, 10, 64)
	if err != nil || s < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: must be a number of seconds since 1970-01-01", value)
	}
	return time.Unix(s, 0).UTC(), nil
}
