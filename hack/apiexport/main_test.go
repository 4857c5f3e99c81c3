package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeExport writes a zip archive shaped as apidiff's module export: the
// entries given, in order, each holding its own name as data.
func writeExport(t *testing.T, names ...string) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, n := range names {
		e, err := w.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(e, "data of "+n); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "in.export")
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// readExport returns the entries of a zip archive, in order, with their data.
func readExport(t *testing.T, name string) []string {
	t.Helper()
	r, err := zip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var entries []string
	for _, e := range r.File {
		rc, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e.Name+": "+string(data))
	}
	return entries
}

func TestFilter(t *testing.T) {
	const m = "example.com/m"
	all := []string{"module", m + ".x", m + "/cmd/tool.x", m + "/api.x", m + "/internal/x.x", m + "/api/v1.x"}
	tests := []struct {
		name    string
		in      []string
		keep    []string
		want    []string // entries of the output
		wantErr string   // part of the error
	}{{
		name: "keeps module and the listed packages in the archive's order",
		in:   all,
		keep: []string{m + "/api/v1", m, m + "/api"},
		want: []string{
			"module: data of module",
			m + ".x: data of " + m + ".x",
			m + "/api.x: data of " + m + "/api.x",
			m + "/api/v1.x: data of " + m + "/api/v1.x",
		},
	}, {
		name: "a listed package without export data is an error",
		in:   all,
		keep: []string{m + "/api", m + "/gone", m + "/also/gone"},
		// apidiff loaded other packages than the caller listed: checking
		// the rest would leave the missing ones unchecked.
		wantErr: "has no export data for " + m + "/gone, " + m + "/also/gone",
	}, {
		name:    "not a module export",
		in:      []string{m + "/api.x"},
		keep:    []string{m + "/api"},
		wantErr: `no entry "module"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.export")
			err := filter(writeExport(t, tt.in...), out, tt.keep)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("filter: error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, readExport(t, out)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAPIDiffScript runs hack/apidiff.sh on a copy of the tree: a release
// baseline with an exported function, then the function removed. The script
// must name the removal and fail until accepted.txt accepts it.
func TestAPIDiffScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module's API three times with the pinned apidiff; run without -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	apidiff := filepath.Join(root, "_output", "bin", "apidiff")
	if _, err := os.Stat(apidiff); err != nil {
		t.Fatalf("the pinned apidiff is not built (%v): run hack/tools.sh (make test-deps runs it)", err)
	}
	dir := copyTree(t, root)
	if err := os.MkdirAll(filepath.Join(dir, "_output", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(apidiff, filepath.Join(dir, "_output", "bin", "apidiff")); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "apidiff_probe.go")
	if err := os.WriteFile(probe, []byte("package vmkit\n\n// APIDiffProbe is in the baseline only.\nfunc APIDiffProbe() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	accepted := filepath.Join(dir, "hack", "api", "accepted.txt")
	if err := os.MkdirAll(filepath.Dir(accepted), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(accepted, []byte("# a change accepted before the release\n- Old: removed\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The release: a baseline with APIDiffProbe, and accepted.txt emptied.
	if out, err := script(dir, "-baseline", "v999.0.0"); err != nil {
		t.Fatalf("hack/apidiff.sh -baseline v999.0.0: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "hack", "api", "v999.0.0.export")); err != nil {
		t.Fatalf("after -baseline v999.0.0: %v", err)
	}
	if data, err := os.ReadFile(accepted); err != nil || len(data) != 0 {
		t.Fatalf("after -baseline, accepted.txt holds %q (error %v), want it empty", data, err)
	}

	// APIDiffProbe removed: reported, and the check fails.
	if err := os.Remove(probe); err != nil {
		t.Fatal(err)
	}
	const removal = "- APIDiffProbe: removed"
	out, err := script(dir)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("hack/apidiff.sh with APIDiffProbe removed: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{
		"Incompatible changes:\n" + removal + "\n",
		"1 incompatible change(s) since v999.0.0 not accepted in hack/api/accepted.txt:\n" + removal + "\n",
		"add its line, exactly as printed above, to hack/api/accepted.txt",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("hack/apidiff.sh with APIDiffProbe removed does not say %q:\n%s", want, out)
		}
	}

	// Accepted with a reason: still reported, and the check passes.
	if err := os.WriteFile(accepted, []byte("# test: the probe goes\n"+removal+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = script(dir)
	if err != nil {
		t.Fatalf("hack/apidiff.sh with the removal accepted: %v\n%s", err, out)
	}
	for _, want := range []string{removal + "\n", "1 incompatible change(s) since v999.0.0, all accepted"} {
		if !strings.Contains(out, want) {
			t.Errorf("hack/apidiff.sh with the removal accepted does not say %q:\n%s", want, out)
		}
	}
}

// script runs hack/apidiff.sh in dir and returns its stdout and stderr.
func script(dir string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(dir, "hack", "apidiff.sh"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// copyTree copies the files git knows in root (tracked, and untracked but not
// ignored, as they are in the work tree) to a temporary directory.
func copyTree(t *testing.T, root string) string {
	t.Helper()
	list, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src, dst := filepath.Join(root, name), filepath.Join(dir, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		} else if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
