package main

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The cloud guest (hack/make-cloud-guest.sh): Debian 12 with cloud-init,
// the QEMU guest agent and OpenSSH as a qcow2 disk, in a container disk
// laid out as KubeVirt's are (the image under /disk/).
const (
	cloudGuestImage = "cloud-guest"
	// cloudGuestDisk is the disk's name in the guest directory and under
	// /disk/ in the image.
	cloudGuestDisk = "debian-12-cloud.qcow2"
)

// cloudGuestImages are the cloud guest's container disk.
func (b *builder) cloudGuestImages() []imageSpec {
	tag := b.opts.tag
	return []imageSpec{{
		name: cloudGuestImage,
		refs: []string{"vmkit/" + cloudGuestImage + ":" + tag, "vmkit/" + cloudGuestImage + ":latest"},
		layers: func(context.Context) ([]*layer, error) {
			return b.layers(b.baseLayer, b.cloudGuestLayer)
		},
		config: v1.Config{Env: []string{defaultPath}},
	}}
}

// cloudGuestLayer holds the cloud guest's disk at /disk/<cloudGuestDisk>.
func (b *builder) cloudGuestLayer() (*layer, error) {
	t := newTree()
	dest := "disk/" + cloudGuestDisk
	if err := t.CopyFile(dest, 0o644, filepath.Join(b.opts.cloudGuest, cloudGuestDisk)); err != nil {
		return nil, fmt.Errorf("%w (make the cloud guest with hack/make-cloud-guest.sh %s)", err, b.opts.cloudGuest)
	}
	return b.write(cloudGuestImage, "vmkit hack/images: /"+dest+" from hack/make-cloud-guest.sh", t)
}
