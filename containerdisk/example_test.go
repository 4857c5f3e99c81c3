package containerdisk_test

import (
	"archive/tar"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/vmkit/vmkit/containerdisk"
)

// A disk image file becomes a container disk, pushed to a registry; the
// reference with the digest is what a VM's containerDisk.image names.
func Example() {
	// A disk image file: here a tiny raw one.
	dir, err := os.MkdirTemp("", "containerdisk")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "guest.img")
	if err := os.WriteFile(path, []byte("a raw disk"), 0o644); err != nil {
		log.Fatal(err)
	}

	// A registry: go-containerregistry's, in memory, on 127.0.0.1.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(reg.URL, "http://") + "/disks/guest:v1")
	if err != nil {
		log.Fatal(err)
	}

	disk, err := containerdisk.Inspect(path)
	if err != nil {
		log.Fatal(err) // not a regular file, empty, a qcow2 with a backing file, ...
	}
	fmt.Println("format:", disk.Format)
	img, err := containerdisk.Image(disk, containerdisk.Options{Architecture: "arm64"})
	if err != nil {
		log.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		log.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		log.Fatal(err)
	}
	pinned := ref.Context().Digest(digest.String()) // host/disks/guest@sha256:...

	// What the launcher pod's container sees.
	pulled, err := remote.Image(pinned)
	if err != nil {
		log.Fatal(err)
	}
	cf, err := pulled.ConfigFile()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("platform:", cf.OS+"/"+cf.Architecture)
	layers, err := pulled.Layers()
	if err != nil {
		log.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("/%s %d:%d %v %d bytes\n", h.Name, h.Uid, h.Gid, h.FileInfo().Mode(), h.Size)
	}
	// Output:
	// format: raw
	// platform: linux/arm64
	// /disk/ 107:107 dr-xr-xr-x 0 bytes
	// /disk/guest.img 107:107 -r--r----- 10 bytes
}
