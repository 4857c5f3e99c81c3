package procfs_test

import (
	"fmt"
	"os"

	"github.com/vmkit/vmkit/nodeagent/internal/procfs"
)

// The node agent gives a launcher's devices, disks and taps to the user
// its process runs as: here, this test's own process.
func ExampleUser() {
	uid, gid, err := procfs.User(os.Getpid())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(uid == os.Getuid(), gid == os.Getgid())
	// Output:
	// true true
}
