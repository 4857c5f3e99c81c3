// Command images builds vmkit's container images as image archives, without
// a registry or a container engine, so that a node's containerd can load
// them with `ctr -n k8s.io images import`:
//
//	registry.k8s.io/pause:3.10   the pause program of hack/images/pause
//	vmkit/virt-operator:TAG      static binaries at /usr/bin/<name>
//	vmkit/virt-controller:TAG
//	vmkit/virt-api:TAG
//	vmkit/virt-handler:TAG
//	vmkit/virt-exportserver:TAG  VirtualMachineExport's download server
//	vmkit/virt-launcher:TAG      virt-launcher, container-disk, and libvirt
//	                             + QEMU from Debian packages
//	vmkit/tiny-guest:TAG, :latest  the test guest's kernel and initramfs (idle, and with qemu-ga) and its disk
//	vmkit/local-path-provisioner:TAG  the local cluster's storage provisioner (storage.go)
//	vmkit/busybox:TAG, :latest   Debian's static busybox, for its helper pods and disk copies
//	vmkit/cloud-guest:TAG, :latest  Debian 12 with cloud-init as a qcow2 container disk (cloudguest.go)
//
// Each image is written to <out>/<name>.tar, an archive holding both an OCI
// image layout and Docker's manifest.json (what `docker save` writes since
// Docker 25). The images are reproducible: the same binaries, guest files
// and Debian packages give the same digests (entries sorted, owned by root,
// dated SOURCE_DATE_EPOCH or 1970, deterministic gzip, no varying
// timestamps in the configuration).
//
// hack/build-images.sh builds the binaries and runs this command; see
// docs/images.md.
package main

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
)

// launcherPackages are the Debian packages of the launcher image; their
// Depends and PreDepends come along. dash provides /bin/sh, which
// qemu-system-x86's /usr/bin/qemu-system-i386 wrapper needs (libvirtd
// probes it at start). ovmf is the UEFI firmware (firmware.bootloader.efi).
// swtpm is the TPM emulator libvirt runs for devices.tpm, swtpm-tools its
// swtpm_setup, which makes each TPM's state and certificates. passt is the
// user-mode network of the passtBinding, which virt-launcher runs.
var launcherPackages = []string{
	"libvirt-daemon", "libvirt-daemon-driver-qemu", "qemu-system-x86", "qemu-utils",
	"coreutils", "libc-bin", "dash", "ovmf", "xorriso", "swtpm", "swtpm-tools", "passt",
}

// crossImages are the images -arch can build for another architecture:
// a static binary on the base layer each.
var crossImages = []string{"virt-operator", "virt-controller", "virt-api", "virt-handler", "virt-exportserver"}

// The PATH of the images: the launcher needs /usr/sbin, where virt-launcher
// finds virtlogd and libvirtd.
const (
	defaultPath  = "PATH=/usr/bin:/bin"
	launcherPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("images: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// options are the command line.
type options struct {
	out, bin, debs, guest, work string
	cloudGuest                  string
	launcherRootfs              string
	tag                         string
	arch                        string
	only                        []string
	exclude                     []string
	layer                       layerOptions
}

func run() error {
	var (
		o        options
		root     string
		only     string
		exclude  string
		level    int
		defGuest = os.Getenv("VMKIT_GUEST_DIR")
		defCloud = os.Getenv("VMKIT_CLOUD_GUEST_DIR")
	)
	flag.StringVar(&root, "root", "../..", "the vmkit repository; the other directories default to places under its _output/")
	flag.StringVar(&o.out, "out", "", "where the image archives go (default <root>/_output/images)")
	flag.StringVar(&o.bin, "bin", "", "the binaries to put in the images (default <root>/_output/image-bin)")
	flag.StringVar(&o.debs, "debs", "", "cache of downloaded Debian packages (default <root>/_output/debs)")
	flag.StringVar(&o.guest, "guest", defGuest, "the test guest made by hack/make-guest.sh (default $VMKIT_GUEST_DIR, else <root>/_output/guest)")
	flag.StringVar(&o.cloudGuest, "cloud-guest", defCloud, "the cloud guest made by hack/make-cloud-guest.sh (default $VMKIT_CLOUD_GUEST_DIR, else <root>/_output/cloud-guest)")
	flag.StringVar(&o.work, "work", "", "scratch space: unpacked packages and layers (default <root>/_output/image-work)")
	flag.StringVar(&o.launcherRootfs, "launcher-rootfs", "", "also write the launcher image's file system to this directory (replaced), e.g. to chroot into it")
	flag.StringVar(&o.tag, "tag", "devel", "tag of the vmkit images")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "architecture of the images (of the binaries in -bin); other than this machine's, only the images without Debian packages (the static binaries: "+strings.Join(crossImages, ",")+")")
	flag.StringVar(&only, "images", "", "comma-separated names of the images to build (default all: "+strings.Join(imageNames(), ",")+")")
	flag.StringVar(&exclude, "exclude-packages", "", "comma-separated Debian packages to leave out of the launcher's dependency closure")
	flag.IntVar(&level, "gzip-level", gzip.DefaultCompression, "gzip level of the layers (changes the digests)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	below := func(p *string, rel string) {
		if *p == "" {
			*p = filepath.Join(root, rel)
		}
	}
	below(&o.out, "_output/images")
	below(&o.bin, "_output/image-bin")
	below(&o.debs, "_output/debs")
	below(&o.guest, "_output/guest")
	below(&o.cloudGuest, "_output/cloud-guest")
	below(&o.work, "_output/image-work")
	o.only = splitList(only)
	for _, n := range o.only {
		if !slices.Contains(imageNames(), n) {
			return fmt.Errorf("-images: unknown image %q (known: %s)", n, strings.Join(imageNames(), ","))
		}
	}
	if o.arch != runtime.GOARCH {
		if len(o.only) == 0 {
			o.only = crossImages
		}
		for _, n := range o.only {
			if !slices.Contains(crossImages, n) {
				return fmt.Errorf("-arch %s: image %s cannot be built for another architecture here (only %s): its Debian packages or guest are this machine's", o.arch, n, strings.Join(crossImages, ","))
			}
		}
	}
	o.exclude = splitList(exclude)
	o.layer.Level = level
	epoch, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	o.layer.ModTime = epoch

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return build(ctx, o)
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (seconds), or the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// build makes the selected images.
func build(ctx context.Context, o options) error {
	for _, d := range []string{o.out, o.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	layersDir, err := os.MkdirTemp(o.work, "layers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(layersDir)
	b := &builder{opts: o, layersDir: layersDir, memo: make(map[string]*layer), report: os.Stdout}
	for _, spec := range b.images() {
		if len(o.only) > 0 && !slices.Contains(o.only, spec.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		img, err := b.buildImage(ctx, spec)
		if err != nil {
			return fmt.Errorf("%s: %w", spec.name, err)
		}
		if spec.name == "virt-launcher" && o.launcherRootfs != "" {
			if err := removeRootfs(o.launcherRootfs); err != nil {
				return err
			}
			if err := extract(img, o.launcherRootfs); err != nil {
				return fmt.Errorf("writing the launcher's file system to %s: %w", o.launcherRootfs, err)
			}
			log.Printf("virt-launcher: file system written to %s", o.launcherRootfs)
		}
		log.Printf("%s: done in %s", spec.name, time.Since(start).Round(10*time.Millisecond))
	}
	return nil
}

// removeRootfs removes what -launcher-rootfs wrote before: a directory
// holding usr/bin/virt-launcher. It refuses to remove anything else but an
// empty directory.
func removeRootfs(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, "usr", "bin", "virt-launcher")); err != nil && len(entries) > 0 {
		return fmt.Errorf("-launcher-rootfs %s: refusing to replace a directory that holds no usr/bin/virt-launcher", dir)
	}
	return os.RemoveAll(dir)
}

// imageSpec describes one image.
type imageSpec struct {
	name   string   // of the archive, <out>/<name>.tar
	refs   []string // tags
	layers func(ctx context.Context) ([]*layer, error)
	config v1.Config
}

// builder makes the layers and images, sharing layers between images.
type builder struct {
	opts      options
	layersDir string
	memo      map[string]*layer
	report    io.Writer // a line per image reference
}

func imageNames() []string {
	var names []string
	for _, s := range (&builder{}).images() {
		names = append(names, s.name)
	}
	return names
}

// images lists every image the command builds.
func (b *builder) images() []imageSpec {
	tag := b.opts.tag
	component := func(name string, user string) imageSpec {
		return imageSpec{
			name: name,
			refs: []string{"vmkit/" + name + ":" + tag},
			layers: func(context.Context) ([]*layer, error) {
				return b.layers(b.baseLayer, func() (*layer, error) {
					return b.binaryLayer(name, "usr/bin/"+name)
				})
			},
			config: v1.Config{Entrypoint: []string{"/usr/bin/" + name}, Env: []string{defaultPath}, User: user},
		}
	}
	return append([]imageSpec{
		{
			name: "pause",
			refs: []string{"registry.k8s.io/pause:3.10"},
			layers: func(context.Context) ([]*layer, error) {
				return b.layers(b.baseLayer, func() (*layer, error) { return b.binaryLayer("pause", "pause") })
			},
			// registry.k8s.io/pause runs as 65535:65535 too.
			config: v1.Config{Entrypoint: []string{"/pause"}, Env: []string{defaultPath}, User: "65535:65535"},
		},
		component("virt-operator", strconv.Itoa(nonRootUID)),
		component("virt-controller", strconv.Itoa(nonRootUID)),
		component("virt-api", strconv.Itoa(nonRootUID)),
		component("virt-handler", "0"),
		component("virt-exportserver", strconv.Itoa(nonRootUID)),
		{
			name:   "virt-launcher",
			refs:   []string{"vmkit/virt-launcher:" + tag},
			layers: b.launcherLayers,
			config: v1.Config{Entrypoint: []string{"/usr/bin/virt-launcher"}, Env: []string{launcherPath}, User: "0"},
		},
		{
			name:   "tiny-guest",
			refs:   []string{"vmkit/tiny-guest:" + tag, "vmkit/tiny-guest:latest"},
			layers: func(context.Context) ([]*layer, error) { return b.layers(b.baseLayer, b.guestLayer) },
			config: v1.Config{Env: []string{defaultPath}},
		},
	}, append(b.storageImages(), b.cloudGuestImages()...)...)
}

// buildImage assembles one image and writes its archive.
func (b *builder) buildImage(ctx context.Context, spec imageSpec) (v1.Image, error) {
	tags, err := parseTags(slices.Compact(spec.refs))
	if err != nil {
		return nil, err
	}
	layers, err := spec.layers(ctx)
	if err != nil {
		return nil, err
	}
	img, err := assemble(layers, spec.config, b.opts.layer.ModTime, b.arch())
	if err != nil {
		return nil, err
	}
	file := filepath.Join(b.opts.out, spec.name+".tar")
	if err := writeArchive(file, img, tags); err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	for _, r := range spec.refs {
		// ref, manifest digest (what containerd reports), image id (what
		// crictl and the kubelet report), archive, size.
		fmt.Fprintf(b.report, "%s\t%s\tid=%s\t%s\t%s\n", r, digest, id, file, humanSize(fi.Size()))
	}
	return img, nil
}

// arch is the images' architecture (-arch, default this machine's).
func (b *builder) arch() string {
	if b.opts.arch == "" {
		return runtime.GOARCH
	}
	return b.opts.arch
}

// layers makes the layers in order.
func (b *builder) layers(makers ...func() (*layer, error)) ([]*layer, error) {
	out := make([]*layer, len(makers))
	for i, m := range makers {
		l, err := m()
		if err != nil {
			return nil, err
		}
		out[i] = l
	}
	return out, nil
}

// write writes a layer once per run, under key.
func (b *builder) write(key, createdBy string, t *tree) (*layer, error) {
	if l, ok := b.memo[key]; ok {
		return l, nil
	}
	start := time.Now()
	l, err := writeLayer(t, b.layersDir, b.opts.layer)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", key, err)
	}
	l.createdBy = createdBy
	b.memo[key] = l
	log.Printf("layer %s: %d entries, %s, %s compressed, %s in %s", key, l.files, humanSize(l.uncompressedSize),
		humanSize(l.size), l.digest, time.Since(start).Round(10*time.Millisecond))
	return l, nil
}

// baseLayer holds the accounts and /tmp of every image but the launcher.
func (b *builder) baseLayer() (*layer, error) {
	t := newTree()
	addAccounts(t, baseUsers, baseGroups)
	return b.write("base", "vmkit hack/images: /etc/passwd, /etc/group, /tmp", t)
}

// binaryLayer holds the static binary <bin>/<name> at dest.
func (b *builder) binaryLayer(name, dest string) (*layer, error) {
	src := filepath.Join(b.opts.bin, name)
	if err := checkBinary(src, b.arch()); err != nil {
		return nil, err
	}
	t := newTree()
	if err := t.CopyFile(dest, 0o755, src); err != nil {
		return nil, err
	}
	return b.write(name, "vmkit hack/images: /"+dest, t)
}

// elfMachines are the ELF machines of the architectures images are built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "s390x": elf.EM_S390}

// checkStatic fails unless path is a statically linked ELF executable.
func checkStatic(path string) error { return checkBinary(path, "") }

// checkBinary fails unless path is a statically linked ELF executable for
// arch (any architecture when arch is ""): how a cross-built image, which
// cannot run here, is checked.
func checkBinary(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is missing: build it first (hack/build-images.sh does)", path)
		}
		return err
	}
	defer f.Close()
	if arch != "" {
		want, ok := elfMachines[arch]
		if !ok {
			return fmt.Errorf("%s: no ELF machine known for architecture %s", path, arch)
		}
		if f.Machine != want {
			return fmt.Errorf("%s is an ELF executable for %s, the image is for %s (%s): build it with GOARCH=%s", path, f.Machine, arch, want, arch)
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: link it statically (hack/build-images.sh: -ldflags '-linkmode external -extldflags -static', or CGO_ENABLED=0)", path)
		}
	}
	return nil
}

// guestLayer holds the test guest's kernel and initramfs under /boot, and
// its disk (BIOS and UEFI) under /disk, as KubeVirt's container disks lay
// their image out.
func (b *builder) guestLayer() (*layer, error) {
	t := newTree()
	for _, f := range []struct{ src, dest string }{
		{"vmlinux", "boot/vmlinux"},
		{"initramfs-idle.cpio.gz", "boot/initramfs-idle.cpio.gz"},
		{"initramfs-agent.cpio.gz", "boot/initramfs-agent.cpio.gz"},
		{"disk.img", "disk/tiny.img"},
	} {
		if err := t.CopyFile(f.dest, 0o644, filepath.Join(b.opts.guest, f.src)); err != nil {
			return nil, fmt.Errorf("%w (make the guest with hack/make-guest.sh %s)", err, b.opts.guest)
		}
	}
	return b.write("tiny-guest", "vmkit hack/images: /boot/vmlinux, /boot/initramfs-idle.cpio.gz, /boot/initramfs-agent.cpio.gz, /disk/tiny.img from hack/make-guest.sh", t)
}

// launcherLayers are, bottom up: the Debian packages (large, changing only
// with the package versions), the configuration that makes libvirt run in
// a container, and vmkit's binaries (changing with every build).
func (b *builder) launcherLayers(ctx context.Context) ([]*layer, error) {
	rootfs, err := b.debianLayer(ctx)
	if err != nil {
		return nil, err
	}
	config := newTree()
	addLauncherConfig(config)
	cfg, err := b.write("launcher-config", "vmkit hack/images: accounts, libvirt configuration, runtime directories", config)
	if err != nil {
		return nil, err
	}

	bins := newTree()
	launcher := filepath.Join(b.opts.bin, "virt-launcher")
	if err := bins.CopyFile("usr/bin/virt-launcher", 0o755, launcher); err != nil {
		return nil, fmt.Errorf("%w: build it first (hack/build-images.sh does)", err)
	}
	createdBy := "vmkit hack/images: /usr/bin/virt-launcher"
	cd := filepath.Join(b.opts.bin, "container-disk")
	switch _, err := os.Stat(cd); {
	case err == nil:
		if err := checkStatic(cd); err != nil {
			return nil, err
		}
		if err := bins.CopyFile("usr/bin/container-disk", 0o755, cd); err != nil {
			return nil, err
		}
		createdBy += ", /usr/bin/container-disk"
	case errors.Is(err, fs.ErrNotExist):
		log.Printf("WARNING: %s does not exist: the virt-launcher image has NO /usr/bin/container-disk (pods with container disks or kernel boot will fail)", cd)
	default:
		return nil, err
	}
	binLayer, err := b.write("launcher-binaries", createdBy, bins)
	if err != nil {
		return nil, err
	}
	return []*layer{rootfs, cfg, binLayer}, nil
}

// debianLayer unpacks the launcher's packages and their dependencies into
// a layer, with a dpkg status.d entry per package (for scanners and
// `dpkg -l`) and /usr/bin aliases of /bin (see addMergedUsrAliases).
func (b *builder) debianLayer(ctx context.Context) (*layer, error) {
	arch, err := output(ctx, "", "dpkg", "--print-architecture")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.opts.debs, 0o755); err != nil {
		return nil, err
	}
	d := &debs{cacheDir: b.opts.debs, arch: strings.TrimSpace(arch), logger: log.Default()}
	pkgs, err := d.resolve(ctx, launcherPackages, b.opts.exclude)
	if err != nil {
		return nil, err
	}
	log.Printf("virt-launcher: %d Debian packages: %s", len(pkgs), strings.Join(pkgs, " "))
	files, err := d.fetch(ctx, pkgs)
	if err != nil {
		return nil, err
	}
	staging := filepath.Join(b.opts.work, "launcher-debs")
	if err := os.RemoveAll(staging); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	control, err := unpack(ctx, files, staging)
	if err != nil {
		return nil, err
	}
	log.Printf("virt-launcher: unpacked %d packages into %s in %s", len(files), staging, time.Since(start).Round(10*time.Millisecond))
	t := newTree()
	skipped, err := t.AddHostDir(staging)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		log.Printf("virt-launcher: skipped %d device nodes, pipes or sockets: %s", len(skipped), strings.Join(skipped, " "))
	}
	t.Dir("var/lib/dpkg/status.d", 0o755)
	for pkg, c := range control {
		t.File("var/lib/dpkg/status.d/"+pkg, 0o644, c)
	}
	n, size := slim(t)
	log.Printf("virt-launcher: left out %d files of documentation, manual pages and translations (%s)", n, humanSize(size))
	aliases := addMergedUsrAliases(t)
	log.Printf("virt-launcher: %d /usr/bin and /usr/sbin aliases of /bin and /sbin", aliases)
	l, err := b.write("debian", "vmkit hack/images: Debian packages "+strings.Join(pkgs, " "), t)
	if err != nil {
		return nil, err
	}
	// The layer holds it all now.
	return l, os.RemoveAll(staging)
}

// humanSize is "12.3 MiB".
func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
