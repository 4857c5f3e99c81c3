package hypervisor_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The life of a domain, run against the fake hypervisor as a unit test of a node agent
// would: convert a VMI, define and start its domain, read the console, stop
// it gracefully and undefine it.
func Example() {
	ctx := context.Background()
	var h hypervisor.Hypervisor = hvfake.New()

	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "9b1f0c2e-7d41-4f3a-8e55-0c6d2b9a7e33"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Memory: &v1.Memory{Guest: resource.NewQuantity(256<<20, resource.BinarySI)},
		}},
	}
	dom, err := domainxml.Convert(vmi, domainxml.Options{Emulation: true})
	if err != nil {
		panic(err)
	}
	xml, err := domainxml.Marshal(dom)
	if err != nil {
		panic(err)
	}
	d, err := h.Define(ctx, xml)
	if err != nil {
		panic(err)
	}
	fmt.Println("defined", d.Name, "for VMI", d.VMI.UID, d.State)

	if err := h.Start(ctx, d.Name, hypervisor.StartOptions{}); err != nil {
		panic(err)
	}
	st, _ := h.State(ctx, d.Name)
	fmt.Println("started:", st)

	console, err := h.Console(ctx, d.Name)
	if err != nil {
		panic(err)
	}
	guest, _ := h.(*hvfake.Hypervisor).GuestConsole(d.Name)
	go io.WriteString(guest, "GUEST-BOOTED\n")
	line := make([]byte, 13)
	if _, err := io.ReadFull(console, line); err != nil {
		panic(err)
	}
	fmt.Printf("console: %s", line)

	found, _ := h.List(ctx, string(vmi.UID))
	fmt.Println("domains of the VMI:", len(found))

	destroyed, err := hypervisor.StopGracefully(ctx, h, d.Name, 10*time.Second, 100*time.Millisecond)
	if err != nil {
		panic(err)
	}
	st, _ = h.State(ctx, d.Name)
	fmt.Println("stopped:", st, "destroyed:", destroyed)
	if err := h.Undefine(ctx, d.Name); err != nil {
		panic(err)
	}
	_, err = h.State(ctx, d.Name)
	fmt.Println(err)
	// Output:
	// defined default_web for VMI 9b1f0c2e-7d41-4f3a-8e55-0c6d2b9a7e33 Shutoff (Unknown)
	// started: Running (Booted)
	// console: GUEST-BOOTED
	// domains of the VMI: 1
	// stopped: Shutoff (Shutdown) destroyed: false
	// state default_web: domain not found
}
