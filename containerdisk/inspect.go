package containerdisk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// Format is a disk image's format, as libvirt and qemu-img name it.
type Format string

// The formats a container disk can hold: qcow2 by its magic, anything else
// raw.
const (
	QCOW2 Format = "qcow2"
	Raw   Format = "raw"
)

// ErrReferencesFile is the error (with errors.Is) of a qcow2 image that
// names another file, a backing file or an external data file: vmkit's
// launcher refuses to boot it, as QEMU would open whatever path the
// image's author wrote, and a container disk carries one file only.
var ErrReferencesFile = errors.New("a qcow2 image that refers to another file cannot be a container disk")

// Disk is a disk image file Inspect accepted.
type Disk struct {
	// Path is the file's path, as given to Inspect.
	Path string
	// Format is qcow2 or raw.
	Format Format
	// Size is the file's size in bytes (for qcow2, not the virtual size).
	Size int64
	// ModTime is the file's modification time when inspected: the layer
	// refuses to read a file whose size or time changed since.
	ModTime time.Time
}

// Inspect checks that the file at path can be a container disk and tells
// its format: a regular file (symbolic links are followed), not empty,
// qcow2 without a backing file or external data file, or raw. Errors name
// path.
func Inspect(path string) (Disk, error) {
	f, err := os.Open(path)
	if err != nil {
		return Disk{}, err // *fs.PathError: names path
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Disk{}, err
	}
	if err := checkMode(path, fi); err != nil {
		return Disk{}, err
	}
	hdr := make([]byte, qcow2HeaderLen)
	n, err := io.ReadFull(f, hdr)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return Disk{}, fmt.Errorf("reading %s: %w", path, err)
	}
	format, err := sniff(hdr[:n], f)
	if err != nil {
		return Disk{}, fmt.Errorf("%s: %w", path, err)
	}
	return Disk{Path: path, Format: format, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// checkMode accepts a regular file that is not empty.
func checkMode(path string, fi fs.FileInfo) error {
	switch mode := fi.Mode(); {
	case mode.IsDir():
		return fmt.Errorf("%s is a directory, not a disk image file", path)
	case !mode.IsRegular():
		return fmt.Errorf("%s is not a regular file (%s): a container disk holds a copy of a disk image file", path, fileType(mode))
	case fi.Size() == 0:
		return fmt.Errorf("%s is empty, not a disk image", path)
	}
	return nil
}

func fileType(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeDevice != 0 && mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	default:
		return "mode " + mode.String()
	}
}

// The qcow2 header (QEMU's docs/interop/qcow2.txt), big-endian: magic (0),
// version (4), backing_file_offset (8, 0 when there is none),
// backing_file_size (16), ...; version 3 adds incompatible_features at 72,
// whose bit 2 is an external data file. nodeagent/launcher checks the
// same.
const (
	qcow2HeaderLen          = 80
	qcow2IncompatibleOffset = 72
	qcow2ExternalDataFile   = 1 << 2
	// maxBackingFileName is QEMU's limit on a backing file name (1023
	// bytes).
	maxBackingFileName = 1023
)

var qcow2Magic = []byte("QFI\xfb")

// sniff tells the format from the file's first bytes (hdr, up to
// qcow2HeaderLen); r reads the backing file's name, when there is one.
func sniff(hdr []byte, r io.ReaderAt) (Format, error) {
	if !bytes.HasPrefix(hdr, qcow2Magic) {
		return Raw, nil
	}
	if len(hdr) < 20 {
		return "", errors.New("truncated qcow2 header")
	}
	version := binary.BigEndian.Uint32(hdr[4:8])
	if version != 2 && version != 3 {
		return "", fmt.Errorf("qcow2 version %d is not supported (2 and 3 are)", version)
	}
	if off := binary.BigEndian.Uint64(hdr[8:16]); off != 0 {
		return "", fmt.Errorf("%w: it has a backing file (%s); make a standalone image with qemu-img convert -O qcow2 <this image> <new file>",
			ErrReferencesFile, backingFileName(r, off, binary.BigEndian.Uint32(hdr[16:20])))
	}
	if version == 3 {
		if len(hdr) < qcow2IncompatibleOffset+8 {
			return "", errors.New("truncated qcow2 header")
		}
		if binary.BigEndian.Uint64(hdr[qcow2IncompatibleOffset:])&qcow2ExternalDataFile != 0 {
			return "", fmt.Errorf("%w: it has an external data file; make a standalone image with qemu-img convert -O qcow2 <this image> <new file>", ErrReferencesFile)
		}
	}
	return QCOW2, nil
}

// backingFileName is the backing file's name as the header's offset and
// size give it, quoted, or a description of why it cannot be read.
func backingFileName(r io.ReaderAt, off uint64, size uint32) string {
	if size == 0 || size > maxBackingFileName || off > 1<<62 {
		return fmt.Sprintf("name of %d bytes at offset %d", size, off)
	}
	name := make([]byte, size)
	if _, err := r.ReadAt(name, int64(off)); err != nil {
		return fmt.Sprintf("name of %d bytes at offset %d, unreadable: %v", size, off, err)
	}
	return fmt.Sprintf("%q", name)
}
