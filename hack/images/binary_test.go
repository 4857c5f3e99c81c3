package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestCheckBinaryArch: a binary of this machine's architecture is refused
// for an image of another one, naming both (how the cross-built images are
// checked, since they cannot run here).
func TestCheckBinaryArch(t *testing.T) {
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	err := checkBinary(os.Args[0], other)
	if err == nil || !strings.Contains(err.Error(), "the image is for "+other) || !strings.Contains(err.Error(), "GOARCH="+other) {
		t.Fatalf("checkBinary(test binary, %s) = %v, want a wrong-architecture error", other, err)
	}
	if err := checkBinary(os.Args[0], "riscv"); err == nil || !strings.Contains(err.Error(), "no ELF machine known") {
		t.Errorf("unknown architecture: %v", err)
	}
}
