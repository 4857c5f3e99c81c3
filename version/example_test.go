package version_test

import (
	"fmt"
	"runtime"

	"github.com/vmkit/vmkit/version"
)

// The Go toolchain and platform are always known; the vmkit version and
// commit when the binary was built from a module version or a checkout.
func ExampleGet() {
	v := version.Get()
	fmt.Println(v.GoVersion == runtime.Version(), v.Platform == runtime.GOOS+"/"+runtime.GOARCH, v.GitVersion != "")
	// Output: true true true
}
