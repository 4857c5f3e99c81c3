package exportserver

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"

	"k8s.io/klog/v2"
)

const (
	// imageName is the disk image in a filesystem claim (CDI's and
	// KubeVirt's layout).
	imageName = "disk.img"
	// excludedName is left out of archives: mkfs's lost+found is no
	// content of the claim.
	excludedName = "lost+found"
	// gzipLevel favours speed: images are large and mostly zeros or
	// already-compressed data, and the server has one CPU to spare.
	gzipLevel = gzip.BestSpeed
)

// openImage opens the disk image of the mount point path: path/disk.img
// when path is a directory (without following a symbolic link out of
// it), else path itself (a block device). It returns the file's
// modification time, zero for a device.
func openImage(path string) (*os.File, time.Time, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	var f *os.File
	if fi.IsDir() {
		root, err := os.OpenRoot(path)
		if err != nil {
			return nil, time.Time{}, err
		}
		defer root.Close()
		if f, err = root.Open(imageName); err != nil {
			return nil, time.Time{}, err
		}
	} else if f, err = os.Open(path); err != nil {
		return nil, time.Time{}, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, time.Time{}, err
	}
	switch {
	case fi.Mode().IsRegular():
		return f, fi.ModTime(), nil
	case fi.Mode()&fs.ModeDevice != 0:
		return f, time.Time{}, nil
	}
	f.Close()
	return nil, time.Time{}, fmt.Errorf("%s is neither a regular file nor a block device", f.Name())
}

// serveRaw serves the image of the mount point path with
// http.ServeContent: ranges, HEAD, If-Range. ServeContent sizes the
// content by seeking to its end, which gives a block device's size too.
func serveRaw(w http.ResponseWriter, r *http.Request, path string) {
	f, modTime, err := openImage(path)
	if err != nil {
		internalError(w, r, err, "Cannot open the image")
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", modTime, f)
}

// serveGzip streams the image of the mount point path gzip-compressed.
// Its length is not known beforehand, so there are no ranges. A stream
// cut by an error has no gzip trailer, which the client detects.
func serveGzip(w http.ResponseWriter, r *http.Request, path string) {
	f, _, err := openImage(path)
	if err != nil {
		internalError(w, r, err, "Cannot open the image")
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	if r.Method == http.MethodHead {
		return
	}
	zw, _ := gzip.NewWriterLevel(w, gzipLevel) // a valid level
	if _, err := io.Copy(zw, f); err != nil {
		klog.FromContext(r.Context()).Error(err, "Gzip stream cut", "path", r.URL.Path)
		return
	}
	if err := zw.Close(); err != nil {
		klog.FromContext(r.Context()).Error(err, "Gzip stream cut", "path", r.URL.Path)
	}
}

// serveArchive streams the directory dir as a gzip-compressed tar
// (writeArchive).
func serveArchive(w http.ResponseWriter, r *http.Request, dir string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		internalError(w, r, err, "Cannot open the volume")
		return
	}
	defer root.Close()
	w.Header().Set("Content-Type", "application/gzip")
	if r.Method == http.MethodHead {
		return
	}
	if err := writeArchive(w, root); err != nil {
		klog.FromContext(r.Context()).Error(err, "Archive stream cut", "path", r.URL.Path)
	}
}

// writeArchive writes the tree of root to w as a gzip-compressed tar, as
// `tar -czf - --exclude=lost+found .` run in it would: names ./…, the
// root itself ./, directories, regular files and symbolic links (not
// followed); sockets, pipes and devices are skipped, and so is anything
// named lost+found. On error the gzip stream is left without its
// trailer, so that a reader sees it is cut.
func writeArchive(w io.Writer, root *os.Root) error {
	zw, _ := gzip.NewWriterLevel(w, gzipLevel) // a valid level
	tw := tar.NewWriter(zw)
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name != "." && d.Name() == excludedName {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		return addToArchive(tw, root, name, d)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// addToArchive writes one entry of the tree to tw.
func addToArchive(tw *tar.Writer, root *os.Root, name string, d fs.DirEntry) error {
	fi, err := d.Info() // not following a symbolic link
	if err != nil {
		return err
	}
	var link string
	switch mode := fi.Mode(); {
	case mode.IsRegular(), mode.IsDir():
	case mode&fs.ModeSymlink != 0:
		if link, err = root.Readlink(name); err != nil {
			return err
		}
	default:
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	hdr.Name = "./" + name
	switch {
	case name == ".":
		hdr.Name = "./"
	case fi.IsDir():
		hdr.Name += "/"
	}
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// serveDir serves the files under the mount point dir at the prefix uri,
// with http.FileServer's listings and ranges. Symbolic links are followed
// only within dir.
func serveDir(w http.ResponseWriter, r *http.Request, uri, dir string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		internalError(w, r, err, "Cannot open the volume")
		return
	}
	defer root.Close()
	http.StripPrefix(uri, http.FileServerFS(root.FS())).ServeHTTP(w, r)
}

// internalError logs err and answers 500, or 404 when the file does not
// exist.
func internalError(w http.ResponseWriter, r *http.Request, err error, msg string) {
	klog.FromContext(r.Context()).Error(err, msg, "path", r.URL.Path)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	http.Error(w, msg, http.StatusInternalServerError)
}
