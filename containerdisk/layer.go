package containerdisk

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// gzipLevel is the layer's compression level. It is part of the digest:
// changing it changes every image's digest. BestSpeed, as
// go-containerregistry's tarball layers: disks are large, often
// compressed qcow2 or mostly zeros, which every level compresses alike.
const gzipLevel = gzip.BestSpeed

// diskLayer is the layer holding the disk: a tar stream of Dir and the
// file, made anew from the file each time it is read. Its digests are
// computed once, by newDiskLayer.
type diskLayer struct {
	disk    Disk
	name    string
	created time.Time

	digest, diffID v1.Hash
	size           int64
}

var _ v1.Layer = (*diskLayer)(nil)

func newDiskLayer(disk Disk, name string, created time.Time) (*diskLayer, error) {
	l := &diskLayer{disk: disk, name: name, created: created}
	diffID, digest := sha256.New(), sha256.New()
	size := &counter{w: digest}
	gz, err := gzip.NewWriterLevel(size, gzipLevel)
	if err != nil {
		return nil, err
	}
	if err := l.writeTar(io.MultiWriter(diffID, gz)); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	l.diffID, l.digest, l.size = sha256Hash(diffID), sha256Hash(digest), size.n
	return l, nil
}

func sha256Hash(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", h.Sum(nil))}
}

// writeTar writes the layer's tar stream to w: the directory, then the
// file, read from the disk's path.
func (l *diskLayer) writeTar(w io.Writer) error {
	f, err := os.Open(l.disk.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != l.disk.Size || !fi.ModTime().Equal(l.disk.ModTime) {
		return fmt.Errorf("%s changed since it was inspected (size %d, now %d; modified %s, now %s)",
			l.disk.Path, l.disk.Size, fi.Size(), l.disk.ModTime.Format(time.RFC3339Nano), fi.ModTime().Format(time.RFC3339Nano))
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: Dir + "/", Mode: DirMode,
		Uid: UID, Gid: GID, ModTime: l.created,
	}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: path.Join(Dir, l.name), Mode: FileMode, Size: l.disk.Size,
		Uid: UID, Gid: GID, ModTime: l.created,
	}); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, l.disk.Size))
	if err != nil {
		return fmt.Errorf("reading %s: %w", l.disk.Path, err)
	}
	if n != l.disk.Size {
		return fmt.Errorf("reading %s: %d bytes, want %d: it changed since it was inspected", l.disk.Path, n, l.disk.Size)
	}
	return tw.Close()
}

// pipe runs write in a goroutine and returns what it writes; its error
// ends the stream. Closing the reader early stops write.
func pipe(write func(io.Writer) error) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	return pr
}

// Uncompressed is the tar stream.
func (l *diskLayer) Uncompressed() (io.ReadCloser, error) {
	return pipe(l.writeTar), nil
}

// Compressed is the tar stream, gzipped as for the digest.
func (l *diskLayer) Compressed() (io.ReadCloser, error) {
	return pipe(func(w io.Writer) error {
		gz, err := gzip.NewWriterLevel(w, gzipLevel)
		if err != nil {
			return err
		}
		if err := l.writeTar(gz); err != nil {
			return err
		}
		return gz.Close()
	}), nil
}

func (l *diskLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *diskLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *diskLayer) Size() (int64, error)                { return l.size, nil }
func (l *diskLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// counter counts the bytes written through it to w.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
