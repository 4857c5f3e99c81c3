package hostsetup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// MountPoints returns the mount points at or under prefix (symbolic links
// resolved, as /proc/self/mountinfo shows them), deepest first.
func MountPoints(prefix string) []string {
	prefix = Resolve(prefix)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	// Deepest first, so children go before their parents; a path mounted
	// several times appears several times.
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// UnmountUnder unmounts every mount strictly below prefix.
func UnmountUnder(prefix string) error {
	var errs []error
	for _, mp := range MountPoints(prefix) {
		if mp == strings.TrimSuffix(Resolve(prefix), "/") {
			continue
		}
		if err := Unmount(mp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func Unmount(path string) error {
	if err := syscall.Unmount(path, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	return nil
}

// Resolve returns path with symbolic links resolved (/var/run is /run),
// keeping a trailing slash; a path that does not exist is returned as is.
func Resolve(path string) string {
	r, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path
	}
	if strings.HasSuffix(path, "/") && !strings.HasSuffix(r, "/") {
		r += "/"
	}
	return r
}

func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// RemoveContents removes everything in dir but dir itself.
func RemoveContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
