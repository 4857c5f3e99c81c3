package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ModuleRoot returns the nearest directory at or above the working directory
// that holds a go.mod file.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for dir := wd; ; {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod in %s or any parent directory", wd)
		}
		dir = parent
	}
}

// BinDir returns the directory holding the control plane binaries:
// $KUBEBUILDER_ASSETS if set, else <module root>/_output/k8s-bin.
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "k8s-bin"), nil
}

// findBinaries returns the path of each named executable in dir, or an error
// that names every missing one and says how to install them.
func findBinaries(dir string, names []string) (map[string]string, error) {
	paths := make(map[string]string, len(names))
	var missing []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, strconv.Quote(name))
			continue
		}
		paths[name] = path
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s in %s ($KUBEBUILDER_ASSETS, else <module root>/_output/k8s-bin); %s",
			strings.Join(missing, ", "), dir, installHint)
	}
	return paths, nil
}
