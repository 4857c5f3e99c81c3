package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// aptDependsFlags make `apt-cache depends` report only what an
// installation without recommendations needs.
var aptDependsFlags = []string{
	"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
	"--no-breaks", "--no-replaces", "--no-enhances",
}

// aptOptions let apt download as root into a directory _apt cannot write.
var aptOptions = []string{"-q", "-o", "APT::Sandbox::User=root", "-o", "DPkg::Lock::Timeout=300"}

// debFile is a package file as `apt-get download --print-uris` names it.
type debFile struct {
	Package string // the file name up to the first "_"
	URI     string
	File    string // e.g. libc6_2.36-9+deb12u14_amd64.deb
	Size    int64
	SHA256  string // hex
}

// parsePrintURIs reads the lines of `apt-get download --print-uris`:
//
//	'http://deb.debian.org/.../coreutils_9.1-1_amd64.deb' coreutils_9.1-1_amd64.deb 2896560 SHA256:6103...
func parsePrintURIs(out string) ([]debFile, error) {
	var files []debFile
	for n, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 || !strings.HasPrefix(f[3], "SHA256:") {
			return nil, fmt.Errorf("line %d of apt-get download --print-uris: cannot parse %q", n+1, line)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("line %d of apt-get download --print-uris: bad size %q", n+1, f[2])
		}
		if f[1] != path.Base(f[1]) || !strings.HasSuffix(f[1], ".deb") {
			return nil, fmt.Errorf("line %d of apt-get download --print-uris: unexpected file name %q", n+1, f[1])
		}
		pkg, _, ok := strings.Cut(f[1], "_")
		if !ok || pkg == "" {
			return nil, fmt.Errorf("line %d of apt-get download --print-uris: unexpected file name %q", n+1, f[1])
		}
		files = append(files, debFile{
			Package: pkg,
			URI:     strings.Trim(f[0], "'"),
			File:    f[1],
			Size:    size,
			SHA256:  strings.TrimPrefix(f[3], "SHA256:"),
		})
	}
	return files, nil
}

// debs resolves and fetches Debian packages with the host's apt.
type debs struct {
	cacheDir string // downloaded .deb files, reused across runs
	arch     string // dpkg --print-architecture
	logger   *log.Logger
}

// resolve returns the closure of roots (see depGraph.closure).
func (d *debs) resolve(ctx context.Context, roots, exclude []string) ([]string, error) {
	out, err := output(ctx, "", "apt-cache", append(slices.Clone(aptDependsFlags), roots...)...)
	if err != nil {
		return nil, fmt.Errorf("%w (when apt knows no packages yet, run apt-get update)", err)
	}
	g, err := parseDepends(out)
	if err != nil {
		return nil, fmt.Errorf("apt-cache depends: %w", err)
	}
	return g.closure(roots, exclude, d.arch)
}

// fetch makes sure the cache holds the candidate version of every package,
// downloading only what is missing or damaged, and returns the files'
// paths in the order of pkgs (apt lists them in an order of its own).
func (d *debs) fetch(ctx context.Context, pkgs []string) ([]string, error) {
	qualified := make([]string, len(pkgs))
	for i, p := range pkgs {
		qualified[i] = p + ":" + d.arch
	}
	// apt-get download leaves out of its list what the current directory
	// already holds: ask in an empty one.
	empty, err := os.MkdirTemp("", "vmkit-apt-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(empty)
	out, err := output(ctx, empty, "apt-get", append(append(slices.Clone(aptOptions), "download", "--print-uris"), qualified...)...)
	if err != nil {
		return nil, err
	}
	listed, err := parsePrintURIs(out)
	if err != nil {
		return nil, err
	}
	byPackage := make(map[string]debFile, len(listed))
	for _, f := range listed {
		byPackage[f.Package] = f
	}
	files := make([]debFile, len(pkgs))
	var missing []string
	for i, p := range pkgs {
		f, ok := byPackage[p]
		if !ok {
			return nil, fmt.Errorf("apt-get download --print-uris names no file for %s", p)
		}
		files[i] = f
		if err := verify(filepath.Join(d.cacheDir, f.File), f); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				d.logger.Printf("downloading %s again: %v", f.File, err)
				if err := os.Remove(filepath.Join(d.cacheDir, f.File)); err != nil {
					return nil, err
				}
			}
			missing = append(missing, qualified[i])
		}
	}
	if len(missing) > 0 {
		d.logger.Printf("downloading %d of %d packages into %s", len(missing), len(pkgs), d.cacheDir)
		if _, err := output(ctx, d.cacheDir, "apt-get", append(append(slices.Clone(aptOptions), "download"), missing...)...); err != nil {
			return nil, err
		}
	} else {
		d.logger.Printf("all %d packages are in %s", len(pkgs), d.cacheDir)
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(d.cacheDir, f.File)
		if err := verify(paths[i], f); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// verify checks a downloaded file's size and SHA-256.
func verify(p string, want debFile) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != want.Size {
		return fmt.Errorf("%s: %d bytes, apt expects %d", p, n, want.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, apt expects %s", p, got, want.SHA256)
	}
	return nil
}

// unpack extracts the packages into dir with `dpkg-deb -x` (no maintainer
// scripts run) and returns each package's control fields (`dpkg-deb -f`)
// by package name, for a dpkg status.d directory.
func unpack(ctx context.Context, files []string, dir string) (map[string][]byte, error) {
	control := make(map[string][]byte, len(files))
	for _, f := range files {
		if _, err := output(ctx, "", "dpkg-deb", "-x", f, dir); err != nil {
			return nil, err
		}
		fields, err := output(ctx, "", "dpkg-deb", "-f", f)
		if err != nil {
			return nil, err
		}
		pkg, ok := controlField(fields, "Package")
		if !ok {
			return nil, fmt.Errorf("%s: no Package field", f)
		}
		control[pkg] = []byte(fields)
	}
	return control, nil
}

// controlField returns a single-line field of a Debian control file.
func controlField(control, name string) (string, bool) {
	for _, line := range strings.Split(control, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// output runs a command and returns its standard output; the error quotes
// the command and its standard error.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		shown := args
		if len(shown) > 12 {
			shown = append(slices.Clip(shown[:12]), fmt.Sprintf("(and %d more)", len(args)-12))
		}
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(shown, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
