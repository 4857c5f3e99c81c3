package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// extract writes the file system a container of img would see into dir,
// which must not exist yet: directories, regular files, symlinks and hard
// links, with their modes, owned by whoever runs this.
func extract(img v1.Image, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var dirs []*tar.Header // modes are applied last: a read-only directory must still be filled
	// Extract goes from the top layer down: an upper layer's symlink or
	// file hides what lower layers have below that path.
	notDirs := make(map[string]bool)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rel := cleanPath(hdr.Name)
		if rel == "" {
			continue
		}
		if strings.HasPrefix(rel, "../") {
			return fmt.Errorf("%s: entry outside the root", hdr.Name)
		}
		if hiddenBelow(rel, notDirs) {
			continue
		}
		if hdr.Typeflag != tar.TypeDir {
			notDirs[rel] = true
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, hdr)
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			if err := os.Chmod(p, fileMode(hdr.Mode)); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, p); err != nil {
				return err
			}
		case tar.TypeLink:
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(cleanPath(hdr.Linkname))), p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected tar entry type %q", hdr.Name, hdr.Typeflag)
		}
	}
	for _, hdr := range dirs {
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(cleanPath(hdr.Name))), fileMode(hdr.Mode)); err != nil {
			return err
		}
	}
	return nil
}

// hiddenBelow reports whether an ancestor of rel is a file or symlink.
func hiddenBelow(rel string, notDirs map[string]bool) bool {
	for i := range len(rel) {
		if rel[i] == '/' && notDirs[rel[:i]] {
			return true
		}
	}
	return false
}

// fileMode converts a tar header's mode bits into Go's file mode.
func fileMode(bits int64) fs.FileMode {
	m := fs.FileMode(bits).Perm()
	if bits&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if bits&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if bits&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
