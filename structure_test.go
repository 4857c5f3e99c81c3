package vmkit_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Size limits that keep every package findable and readable (issue #42):
// a package holds one job, so it stays under maxPackageLines lines of
// non-test code, and no hand-written file grows past maxFileLines.
const (
	maxPackageLines = 3000
	maxFileLines    = 800
)

// sizeExempt are the packages the limits leave out: the API types, which
// follow KubeVirt's own files and field for field its API, and
// installstrategy, the catalogue of every object the operator installs.
var sizeExempt = map[string]string{
	"vmapi/v1":        "the kubevirt.io/v1 API types",
	"installstrategy": "the catalogue of what the operator installs",
}

// TestPackageAndFileSizes fails when a package has more than
// maxPackageLines lines of non-test Go or a non-test file more than
// maxFileLines, generated code aside.
func TestPackageAndFileSizes(t *testing.T) {
	perPackage := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case path == ".":
				return nil
			case strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "node_modules":
				return filepath.SkipDir
			case path == "vmapi/generated":
				return filepath.SkipDir
			}
			// Another module (examples/embed, hack/images) is its own house.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("// Code generated")) && bytes.Contains(b, []byte("DO NOT EDIT")) {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if _, ok := sizeExempt[dir]; ok {
			return nil
		}
		lines := bytes.Count(b, []byte("\n"))
		perPackage[dir] += lines
		if lines > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it along its jobs", path, lines, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perPackage) < 50 {
		t.Fatalf("found only %d packages; the check is not looking at the module", len(perPackage))
	}
	for dir, lines := range perPackage {
		if lines > maxPackageLines {
			t.Errorf("package %s has %d lines of non-test Go, more than %d: move a concern into its own package", dir, lines, maxPackageLines)
		}
	}
}
