package cluster

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestPVMNote(t *testing.T) {
	dir := t.TempDir()
	if got := pvmNote(dir); !strings.Contains(got, "PVM ("+dir+")") {
		t.Errorf("pvmNote(%q) = %q, want it to name PVM and %s", dir, got, dir)
	}
	if got := pvmNote(filepath.Join(dir, "kvm_pvm")); got != "" {
		t.Errorf("pvmNote on a host without the module = %q, want \"\"", got)
	}
}
