package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The local cluster's storage (docs/cluster.md, "Storage"): Rancher's
// local-path-provisioner, built from the Go module proxy by
// hack/build-storage.sh, and a busybox image, which the provisioner's
// helper pods run (mkdir and rm of a volume's directory) and which fills
// claims with disk images (examples/vm-pvc.yaml).
const (
	localPathImage = "local-path-provisioner"
	busyboxImage   = "busybox"
	// busyboxPackage is Debian's statically linked busybox.
	busyboxPackage = "busybox-static"
)

// storageImages are the images of the local cluster's storage.
func (b *builder) storageImages() []imageSpec {
	tag := b.opts.tag
	return []imageSpec{
		{
			name: localPathImage,
			refs: []string{"vmkit/" + localPathImage + ":" + tag},
			layers: func(context.Context) ([]*layer, error) {
				return b.layers(b.baseLayer, func() (*layer, error) {
					return b.binaryLayer(localPathImage, "usr/bin/"+localPathImage)
				})
			},
			config: v1.Config{Entrypoint: []string{"/usr/bin/" + localPathImage}, Env: []string{defaultPath}, User: strconv.Itoa(nonRootUID)},
		},
		{
			name: busyboxImage,
			refs: []string{"vmkit/" + busyboxImage + ":" + tag, "vmkit/" + busyboxImage + ":latest"},
			layers: func(ctx context.Context) ([]*layer, error) {
				return b.layers(b.baseLayer, func() (*layer, error) { return b.busyboxLayer(ctx) })
			},
			config: v1.Config{Cmd: []string{"/bin/sh"}, Env: []string{defaultPath}},
		},
	}
}

// busyboxLayer holds Debian's static busybox as /bin/busybox, a symbolic
// link to it for every applet at the path busybox installs it
// (`busybox --list-full`: /bin/sh, /bin/mkdir, /usr/bin/dd, ...) and the
// package's copyright file.
func (b *builder) busyboxLayer(ctx context.Context) (*layer, error) {
	arch, err := output(ctx, "", "dpkg", "--print-architecture")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.opts.debs, 0o755); err != nil {
		return nil, err
	}
	d := &debs{cacheDir: b.opts.debs, arch: strings.TrimSpace(arch), logger: log.Default()}
	files, err := d.fetch(ctx, []string{busyboxPackage})
	if err != nil {
		return nil, err
	}
	staging := filepath.Join(b.opts.work, "busybox-deb")
	if err := os.RemoveAll(staging); err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	control, err := unpack(ctx, files, staging)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(staging, "bin", "busybox")
	if err := checkStatic(bin); err != nil {
		return nil, fmt.Errorf("%s: %w", busyboxPackage, err)
	}
	list, err := output(ctx, "", bin, "--list-full")
	if err != nil {
		return nil, err
	}
	t := newTree()
	if err := t.CopyFile("bin/busybox", 0o755, bin); err != nil {
		return nil, err
	}
	applets := busyboxApplets(list)
	for _, p := range applets {
		t.Symlink(p, "/bin/busybox")
	}
	doc := "usr/share/doc/" + busyboxPackage + "/copyright"
	if err := t.CopyFile(doc, 0o644, filepath.Join(staging, doc)); err != nil {
		return nil, err
	}
	t.File("var/lib/dpkg/status.d/"+busyboxPackage, 0o644, control[busyboxPackage])
	version, _ := controlField(string(control[busyboxPackage]), "Version")
	return b.write(busyboxImage, fmt.Sprintf("vmkit hack/images: Debian package %s %s, %d applets", busyboxPackage, version, len(applets)), t)
}

// busyboxApplets turns `busybox --list-full` into clean relative paths,
// sorted, without busybox itself.
func busyboxApplets(list string) []string {
	var out []string
	for _, l := range strings.Split(list, "\n") {
		p := cleanPath(strings.TrimSpace(l))
		if p == "" || p == "bin/busybox" {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
