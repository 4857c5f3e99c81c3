package vmcontrol_test

import (
	"fmt"

	"github.com/vmkit/vmkit/vmcontrol"
)

// A Manager needs a REST config and the launcher-pod configuration (or a
// renderer); virt-controller builds both from its flags (see cmd/virt-controller).
func ExampleNewManager() {
	_, err := vmcontrol.NewManager(vmcontrol.Options{})
	fmt.Println(err)
	// Output: vmcontrol: Options.Config and one of Options.PodTemplate and Options.Renderer are required
}
