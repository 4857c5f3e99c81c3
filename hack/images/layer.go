package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// layer is a gzip-compressed tar file on disk, written by writeLayer. It
// implements v1.Layer with the digests computed while it was written, so
// nothing is read twice.
type layer struct {
	path             string
	digest, diffID   v1.Hash
	size             int64 // compressed
	uncompressedSize int64
	files            int // entries in the tar
	createdBy        string
}

var _ v1.Layer = (*layer)(nil)

// Digest is the SHA-256 of the compressed blob.
func (l *layer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the SHA-256 of the uncompressed tar.
func (l *layer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Compressed opens the blob.
func (l *layer) Compressed() (io.ReadCloser, error) { return os.Open(l.path) }

// Uncompressed opens the blob and decompresses it.
func (l *layer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", l.path, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, f}, nil
}

// Size is the size of the compressed blob.
func (l *layer) Size() (int64, error) { return l.size, nil }

// MediaType is that of a gzip-compressed OCI layer.
func (l *layer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// layerOptions fix everything about a layer besides its files.
type layerOptions struct {
	// ModTime of every entry (SOURCE_DATE_EPOCH, or the Unix epoch).
	ModTime time.Time
	// Level of gzip compression.
	Level int
}

// writeLayer writes t as a layer blob into dir, named after its digest.
// The result depends only on t's paths, modes, contents and symlink targets
// and on opts: entries are sorted, parents come before their children
// (missing parent directories are added with mode 0755), every entry belongs
// to uid and gid 0 and carries opts.ModTime, and the gzip header has no name
// and no time.
func writeLayer(t *tree, dir string, opts layerOptions) (*layer, error) {
	entries, err := withParents(t.entries)
	if err != nil {
		return nil, err
	}
	paths := slices.Sorted(maps.Keys(entries))

	tmp, err := os.CreateTemp(dir, ".layer-*")
	if err != nil {
		return nil, err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // a no-op after the rename
	}()
	compressed := &hashingWriter{w: tmp, h: sha256.New()}
	zw, err := gzip.NewWriterLevel(compressed, opts.Level)
	if err != nil {
		return nil, err
	}
	// "No time" in the header is 0; this gzip writes a zero time.Time as
	// its Unix seconds cut to 32 bits (a date in 2042).
	zw.ModTime = time.Unix(0, 0)
	uncompressed := &hashingWriter{w: zw, h: sha256.New()}
	tw := tar.NewWriter(uncompressed)
	modTime := opts.ModTime.UTC().Truncate(time.Second)
	for _, p := range paths {
		e := entries[p]
		hdr := &tar.Header{Typeflag: e.typ, Name: p, Mode: e.mode, ModTime: modTime}
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.target
		case tar.TypeReg:
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if e.typ != tar.TypeReg {
			continue
		}
		if err := writeContent(tw, e); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	l := &layer{
		digest:           v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.h.Sum(nil))},
		diffID:           v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.h.Sum(nil))},
		size:             compressed.n,
		uncompressedSize: uncompressed.n,
		files:            len(paths),
	}
	l.path = filepath.Join(dir, l.digest.Hex+".tar.gz")
	if err := os.Rename(tmp.Name(), l.path); err != nil {
		return nil, err
	}
	return l, nil
}

// writeContent copies a regular file's content into tw, failing when a
// host file changed its size since it was added.
func writeContent(tw *tar.Writer, e entry) error {
	if e.src == "" {
		_, err := tw.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	if err != nil {
		return err
	}
	if n != e.size {
		return fmt.Errorf("%s changed while the layer was written (%d bytes, expected %d)", e.src, n, e.size)
	}
	return nil
}

// withParents returns entries plus a 0755 directory for every missing
// parent, and fails when a parent is present but is not a directory (a
// path below a symlink or a file).
func withParents(entries map[string]entry) (map[string]entry, error) {
	out := make(map[string]entry, len(entries))
	for p, e := range entries {
		if p == "" {
			return nil, fmt.Errorf("the root directory cannot be an entry")
		}
		out[p] = e
	}
	for p := range entries {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			parent, ok := out[dir]
			if !ok {
				out[dir] = entry{typ: tar.TypeDir, mode: 0o755}
				continue
			}
			if parent.typ != tar.TypeDir {
				return nil, fmt.Errorf("%s: parent %s is not a directory", p, dir)
			}
		}
	}
	return out, nil
}

// hashingWriter hashes and counts what it passes on.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}
