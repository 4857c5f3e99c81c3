package sidecar_test

import (
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/vmkit/vmkit/containerdisk/sidecar"
)

// A container disk's sidecar copies the image's /disk to the volume it
// shares with the launcher; the launcher finds the disk under the copy
// path.
func Example() {
	root, shared := tempDir(), tempDir() // the image's root; the pod's volume
	defer os.RemoveAll(root)
	defer os.RemoveAll(shared)
	if err := os.MkdirAll(filepath.Join(root, "disk"), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "disk", "fedora.qcow2"), []byte("QFI\xfb..."), 0o440); err != nil {
		log.Fatal(err)
	}

	copyPath := filepath.Join(shared, "4f1c-uid", "disk_0")
	if err := sidecar.Serve(root, copyPath, sidecar.Options{}); err != nil {
		log.Fatal(err)
	}
	_ = filepath.WalkDir(shared, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(shared, p)
			fmt.Println(rel)
		}
		return err
	})
	// Output:
	// 4f1c-uid/disk_0/disk/fedora.qcow2
}

func tempDir() string {
	dir, err := os.MkdirTemp("", "sidecar-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}
