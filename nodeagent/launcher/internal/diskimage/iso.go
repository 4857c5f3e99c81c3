package diskimage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// isoTool writes the ISO images of cloud-init and config volumes: xorriso's
// mkisofs emulation, from Debian's xorriso package, as in KubeVirt's
// launcher.
const isoTool = "xorrisofs"

// isoMaxDepth bounds the directory levels of a config volume's image, the
// root included (ISO 9660's limit; Rock Ridge could go deeper, but no
// Kubernetes volume needs to, and it stops a link loop).
const isoMaxDepth = 8

// isoFile is one file of an ISO image. Name is its path from the root
// directory, with '/' between directories ("openstack/latest/user_data").
// Mode holds its permission bits, 0o644 when zero.
type isoFile struct {
	Name string
	Data []byte
	Mode fs.FileMode
}

// writeISO writes an ISO 9660 image with Rock Ridge and Joliet names to
// path, holding files (directories are made for their paths), as KubeVirt
// does: xorrisofs -volid <label> -joliet -rock. label is the volume ID
// (cloud-init's NoCloud looks for "cidata", its ConfigDrive for
// "config-2"). The files are staged in a directory next to path, and the
// image is renamed into place when complete.
func writeISO(ctx context.Context, path, label string, files []isoFile) error {
	if len(label) > 32 {
		return fmt.Errorf("ISO volume label %q: longer than 32 characters", label)
	}
	tool, err := exec.LookPath(isoTool)
	if err != nil {
		return fmt.Errorf("%s, which writes ISO images, is not in PATH: install Debian's xorriso package: %w", isoTool, err)
	}
	staging, err := os.MkdirTemp(filepath.Dir(path), ".iso-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	root := filepath.Join(staging, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if !filepath.IsLocal(f.Name) || filepath.ToSlash(filepath.Clean(f.Name)) != f.Name {
			return fmt.Errorf("ISO file name %q: not a clean relative path", f.Name)
		}
		p := filepath.Join(root, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("ISO file %q: %w", f.Name, err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		// O_EXCL: a name given twice is an error, not a silent overwrite.
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return fmt.Errorf("ISO file %q: %w", f.Name, err)
		}
		_, err = out.Write(f.Data)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(p, mode) // not narrowed by the umask
		}
		if err != nil {
			return fmt.Errorf("ISO file %q: %w", f.Name, err)
		}
	}
	img := filepath.Join(staging, "image.iso")
	if err := run(ctx, tool, "-quiet", "-output", img, "-volid", label, "-joliet", "-rock", root); err != nil {
		return err
	}
	if err := os.Chmod(img, 0o640); err != nil {
		return err
	}
	return os.Rename(img, path)
}
