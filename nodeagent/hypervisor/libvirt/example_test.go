package libvirt_test

import (
	"context"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/hypervisor/libvirt"
)

// Connect to the local libvirt daemon and list the domains created from
// VMIs. (Not run as a test: it needs libvirtd.)
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := libvirt.New(ctx, libvirt.Options{URI: libvirt.DefaultURI})
	if err != nil {
		panic(err)
	}
	defer h.Close()

	var hv hypervisor.Hypervisor = h
	domains, err := hv.List(ctx, "")
	if err != nil {
		panic(err)
	}
	for _, d := range domains {
		fmt.Println(d.Name, d.VMI.Namespace+"/"+d.VMI.Name, d.State)
	}
}
