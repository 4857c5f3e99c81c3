package main

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// entry is one file system object of a layer. A regular file holds its
// content either in data or in the host file src.
type entry struct {
	typ    byte  // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode   int64 // permission bits, with setuid (04000), setgid (02000) and sticky (01000)
	data   []byte
	src    string
	size   int64
	target string // of a symlink
}

// tree is the content of one layer: file system objects by their path
// relative to the root, slash-separated and clean ("usr/bin/virt-handler").
// Every object belongs to root:root; timestamps are the layer's.
type tree struct {
	entries map[string]entry
}

func newTree() *tree {
	return &tree{entries: make(map[string]entry)}
}

// cleanPath turns "/usr//bin/" into "usr/bin"; the root itself is "".
func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// Dir adds a directory.
func (t *tree) Dir(p string, mode int64) {
	t.entries[cleanPath(p)] = entry{typ: tar.TypeDir, mode: mode}
}

// File adds a regular file with the given content.
func (t *tree) File(p string, mode int64, data []byte) {
	t.entries[cleanPath(p)] = entry{typ: tar.TypeReg, mode: mode, data: data, size: int64(len(data))}
}

// Symlink adds a symbolic link to target, which is stored as given.
func (t *tree) Symlink(p, target string) {
	t.entries[cleanPath(p)] = entry{typ: tar.TypeSymlink, mode: 0o777, target: target}
}

// CopyFile adds the regular file src of the host as p. The content is read
// when the layer is written.
func (t *tree) CopyFile(p string, mode int64, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	t.entries[cleanPath(p)] = entry{typ: tar.TypeReg, mode: mode, src: src, size: fi.Size()}
	return nil
}

// AddHostDir adds everything below the host directory root (not root
// itself) at the same paths: directories, regular files (hard links become
// separate files), and symlinks as symlinks with their targets unchanged.
// It returns the paths of what it skipped: device nodes, pipes and sockets.
func (t *tree) AddHostDir(root string) (skipped []string, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := permBits(fi.Mode())
		switch {
		case fi.IsDir():
			t.Dir(rel, mode)
		case fi.Mode().IsRegular():
			t.entries[cleanPath(rel)] = entry{typ: tar.TypeReg, mode: mode, src: p, size: fi.Size()}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.Symlink(rel, target)
		default:
			skipped = append(skipped, rel)
		}
		return nil
	})
	return skipped, err
}

// permBits converts Go's file mode into the tar header's mode bits.
func permBits(m fs.FileMode) int64 {
	bits := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}
