package safepath_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
)

// A tenant replaced its socket directory by a link to another VMI's: the
// node agent refuses to go there.
func ExampleOpenBeneath() {
	volume, _ := os.MkdirTemp("", "sockets")
	defer os.RemoveAll(volume)
	_ = os.MkdirAll(filepath.Join(volume, "victim-uid"), 0o755)
	_ = os.WriteFile(filepath.Join(volume, "victim-uid", "final.json"), []byte(`{"uid":"victim-uid"}`), 0o644)
	_ = os.Symlink(filepath.Join(volume, "victim-uid"), filepath.Join(volume, "tenant-uid"))

	_, err := safepath.OpenBeneath(volume, "tenant-uid")
	fmt.Println("tenant-uid is a link:", errors.Is(err, syscall.ELOOP))

	dir, err := safepath.OpenBeneath(volume, "victim-uid")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dir.Close()
	b, err := dir.ReadFile("final.json", 1<<20)
	fmt.Println(string(b), err)
	// Output:
	// tenant-uid is a link: true
	// {"uid":"victim-uid"} <nil>
}
