// Package containerdiskcmd is vmctl's "containerdisk" command: "push" and
// "build" make the container disk image of a qcow2 or raw disk image file
// (package containerdisk) and push it to a registry or write it to an
// archive.
package containerdiskcmd

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/vmkit/vmkit/containerdisk"
)

// containerDiskFlags are the flags saying what image to make, shared by
// "containerdisk push" and "containerdisk build".
type containerDiskFlags struct {
	diskName string
	arch     string
}

func (f *containerDiskFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.diskName, "disk-name", "", "The disk's file name in the image, under /disk/ (default: the file's base name).")
	cmd.Flags().StringVar(&f.arch, "arch", "amd64", "The image's CPU architecture: "+strings.Join(containerdisk.Architectures, ", ")+".")
	_ = cmd.RegisterFlagCompletionFunc("arch", cobra.FixedCompletions(containerdisk.Architectures, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("disk-name", cobra.NoFileCompletions)
}

// image checks the file at path and makes its container disk image,
// telling the user on stderr what it found.
func (f *containerDiskFlags) image(cmd *cobra.Command, path string) (v1.Image, error) {
	created, err := containerdisk.SourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return nil, err
	}
	disk, err := containerdisk.Inspect(path)
	if err != nil {
		return nil, fmt.Errorf("FILE: %w", err)
	}
	diskName := f.diskName
	if diskName == "" {
		diskName = filepath.Base(path)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s image, %s; reading it into /disk/%s of a linux/%s image\n",
		path, disk.Format, byteSize(disk.Size), diskName, f.arch)
	return containerdisk.Image(disk, containerdisk.Options{Name: f.diskName, Architecture: f.arch, Created: created})
}

// check refuses a bad --arch or --disk-name before the file is read (as
// containerdisk.Image would, naming the flags).
func (f *containerDiskFlags) check() error {
	if !slices.Contains(containerdisk.Architectures, f.arch) {
		return fmt.Errorf("--arch %q is not supported: use %s", f.arch, strings.Join(containerdisk.Architectures, ", "))
	}
	if n := f.diskName; n != "" && (n == "." || n == ".." || strings.ContainsAny(n, "/\x00")) {
		return fmt.Errorf("--disk-name %q: must be a file name, without a slash", n)
	}
	return nil
}

// Options are what the commands take from vmctl's root command.
type Options struct {
	// Example formats a command's examples: each "%[1]s" is the program
	// as the user types it.
	Example func(format string) string
	// UserAgent is the HTTP user agent of pushes.
	UserAgent string
}

// NewCommand returns the "containerdisk" command and its "push" and
// "build" subcommands.
func NewCommand(opts Options) *cobra.Command {
	c := &command{opts: opts}
	return c.containerDiskCommand()
}

type command struct{ opts Options }

func (c *command) example(format string) string { return c.opts.Example(format) }

func (c *command) containerDiskCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "containerdisk",
		Short: "Wrap a qcow2 or raw disk image as a container disk image and push it to a registry.",
		Long: `Bring your own disk: wrap a qcow2 or raw disk image file as a KubeVirt container disk, an OCI
image holding the file at /disk/<name>, and push it to a registry (push) or write it to an archive
(build). A VirtualMachine boots it with

  volumes:
  - name: rootdisk
    containerDisk:
      image: <the reference push prints>

The image holds one layer: the directory /disk (owner 107:107, the qemu user, mode 0555) and the
disk file in it (owner 107:107, mode 0440), as KubeVirt's documented Dockerfile makes
(FROM scratch, ADD --chown=107:107 disk.qcow2 /disk/); OCI manifest and configuration, os linux,
no entrypoint. It is reproducible: every time is SOURCE_DATE_EPOCH (default 1970-01-01) and the
compression fixed, so the same file gives the same digest on any machine (with vmctl built by the
same Go release, whose gzip it uses).

The file is checked first: it must be a regular file, not empty; qcow2 (found by its magic) or
else raw. A qcow2 image with a backing file or an external data file is refused, as vmkit's
launcher refuses it: convert it to a standalone image first (qemu-img convert -O qcow2 IN OUT).
The file is streamed, never read whole into memory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(c.containerDiskPushCommand(), c.containerDiskBuildCommand())
	return cmd
}

func (c *command) containerDiskPushCommand() *cobra.Command {
	var f containerDiskFlags
	var insecure bool
	cmd := &cobra.Command{
		Use:   "push FILE IMAGE",
		Short: "Push a qcow2 or raw disk image file to a registry as a container disk; print IMAGE@sha256:<digest>.",
		Long: `Makes the container disk image of FILE (see "containerdisk --help" for what it holds) and pushes it
to IMAGE, a registry reference with an optional tag (default :latest), not a digest.

Standard output gets one line, IMAGE@sha256:<digest> (IMAGE without its tag): paste it into the
VM as spec.template.spec.volumes[].containerDisk.image. A reference with its digest always means
this image, even after the tag moves, and the kubelet does not pull it again when the node has it
(the default imagePullPolicy of a digest is IfNotPresent; of a :latest tag, Always). What was found
and the upload's progress go to standard error.

Credentials are docker's and podman's: "docker login" or "podman login" (~/.docker/config.json,
$DOCKER_CONFIG, $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json) and their credential
helpers. The registry is reached over HTTPS; one on localhost, 127.0.0.1, ::1 or a private
address (10/8, 172.16/12, 192.168/16) over plain HTTP when it does not answer HTTPS, as docker
does for 127.0.0.0/8. --insecure allows plain HTTP and unverified TLS for any host.`,
		Example: c.example(`  # Push a Fedora cloud image as a container disk and boot it:
  %[1]s containerdisk push Fedora-Cloud-Base.x86_64.qcow2 quay.io/me/fedora:41
  # prints quay.io/me/fedora@sha256:...: the VM's containerDisk.image

  # To a local registry (plain HTTP), an arm64 image, the disk named disk.img inside:
  %[1]s containerdisk push --arch arm64 --disk-name disk.img ./guest.raw localhost:5000/guest:v1`),
		Args: cobra.ExactArgs(2),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveDefault // files
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path, image := args[0], args[1]
			if err := f.check(); err != nil {
				return err
			}
			ref, err := parsePushReference(image, insecure)
			if err != nil {
				return err
			}
			img, err := f.image(cmd, path)
			if err != nil {
				return err
			}
			digest, err := img.Digest()
			if err != nil {
				return err
			}
			errOut := cmd.ErrOrStderr()
			fmt.Fprintf(errOut, "pushing %s (%s)\n", ref.Name(), digest)
			progress := make(chan v1.Update, 64)
			done := make(chan struct{})
			go func() {
				defer close(done)
				reportProgress(errOut, progress)
			}()
			opts := []remote.Option{
				remote.WithContext(contextOf(cmd)),
				remote.WithAuthFromKeychain(authn.DefaultKeychain),
				remote.WithUserAgent(c.opts.UserAgent),
				remote.WithProgress(progress),
			}
			if insecure {
				opts = append(opts, remote.WithTransport(insecureTransport()))
			}
			err = remote.Write(ref, img, opts...)
			<-done
			if err != nil {
				return fmt.Errorf("pushing %s: %w", image, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), pinned(image, ref, digest))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&insecure, "insecure", false, "Allow plain HTTP and unverified TLS to the registry (localhost, loopback and private addresses may be plain HTTP anyway).")
	return cmd
}

// pinned is the image's repository as the user wrote it, without the
// tag, at digest: "quay.io/me/fedora@sha256:..." for quay.io/me/fedora:41.
// The tag is left out because the kubelet pulls an image tagged latest
// again at every start (imagePullPolicy Always), digest or not; a
// repository@digest reference is IfNotPresent.
func pinned(image string, tag name.Tag, digest v1.Hash) string {
	return strings.TrimSuffix(image, ":"+tag.TagStr()) + "@" + digest.String()
}

// parsePushReference parses IMAGE: a tag, with the default registry
// (Docker Hub) and tag (latest) as docker has them; a digest is refused.
func parsePushReference(image string, insecure bool) (name.Tag, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(image, opts...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("IMAGE %q: %w", image, err)
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return name.Tag{}, fmt.Errorf("IMAGE %q: give a repository with an optional tag, not a digest: the image's digest is printed after the push", image)
	}
	return tag, nil
}

// insecureTransport is go-containerregistry's transport without TLS
// verification, for --insecure (name.Insecure allows plain HTTP).
func insecureTransport() http.RoundTripper {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // what --insecure asks for
	return t
}

// reportProgress prints the upload's progress every few seconds and when
// complete, until the channel closes.
func reportProgress(w io.Writer, updates <-chan v1.Update) {
	const every = 3 * time.Second
	last := time.Now() // nothing to say about the first seconds
	done := false
	for u := range updates {
		if u.Error != nil || u.Total <= 0 || done {
			continue
		}
		done = u.Complete >= u.Total
		if done || time.Since(last) >= every {
			last = time.Now()
			fmt.Fprintf(w, "uploaded %d%% (%s of %s)\n", u.Complete*100/u.Total, byteSize(u.Complete), byteSize(u.Total))
		}
	}
}

func (c *command) containerDiskBuildCommand() *cobra.Command {
	var f containerDiskFlags
	var output, tag string
	cmd := &cobra.Command{
		Use:   "build FILE --output IMAGE.tar",
		Short: "Write a qcow2 or raw disk image file as a container disk image archive, for nodes without a registry.",
		Long: `Makes the container disk image of FILE, the same image "containerdisk push" pushes (see
"containerdisk --help"), and writes it to an archive: an OCI image layout with docker's
manifest.json, which "ctr -n k8s.io images import", "docker load" and "podman load" read. The image is
named --tag in the archive (default: containerdisk/<disk name without extension>:latest, e.g.
containerdisk/fedora:latest for fedora.qcow2).

Standard output gets one line, the tag's repository at the manifest digest (REPOSITORY@sha256:...):
containerd keeps that digest on import, and "containerdisk push" of the same file gives the same.
A VM on a node that imported the archive can use that reference, or the tag with
imagePullPolicy: IfNotPresent or Never.`,
		Example: c.example(`  # Write the image and import it on a node:
  %[1]s containerdisk build fedora.qcow2 --output fedora.tar --tag example.com/fedora:41
  ctr -n k8s.io images import fedora.tar`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if output == "" {
				return fmt.Errorf("--output is required: the archive to write")
			}
			if err := f.check(); err != nil {
				return err
			}
			if tag == "" {
				tag = defaultArchiveTag(f.diskName, path)
			}
			t, err := name.NewTag(tag)
			if err != nil {
				return fmt.Errorf("--tag %q: %w", tag, err)
			}
			img, err := f.image(cmd, path)
			if err != nil {
				return err
			}
			if err := writeArchiveFile(output, img, t); err != nil {
				return fmt.Errorf("--output %s: %w", output, err)
			}
			digest, err := img.Digest()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%s)\n", output, t.Name())
			fmt.Fprintln(cmd.OutOrStdout(), pinned(tag, t, digest))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "The archive to write (required).")
	cmd.Flags().StringVar(&tag, "tag", "", "The image's name in the archive (default: containerdisk/<disk name without extension>:latest).")
	_ = cmd.MarkFlagFilename("output", "tar")
	return cmd
}

// defaultArchiveTag is containerdisk/<name>:latest, the disk's name in
// the image without its extension, lower case, other characters than
// letters, digits, ".", "_" and "-" made "-".
func defaultArchiveTag(diskName, path string) string {
	if diskName == "" {
		diskName = filepath.Base(path)
	}
	base := strings.ToLower(strings.TrimSuffix(diskName, filepath.Ext(diskName)))
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, base)
	base = strings.Trim(base, ".-_")
	if base == "" {
		base = "disk"
	}
	return "containerdisk/" + base + ":latest"
}

// writeArchiveFile writes the archive atomically: a temporary file beside
// path, renamed when complete.
func writeArchiveFile(path string, img v1.Image, tag name.Tag) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // a no-op after the rename
	}()
	if err := containerdisk.WriteArchive(tmp, img, tag); err != nil {
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

// byteSize is n bytes for people: "10 bytes", "1.5 MiB", "2.0 GiB".
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// contextOf is the command's context (Background when run with Execute).
func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
