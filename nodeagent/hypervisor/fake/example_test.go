package fake_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
)

// A test makes the hypervisor fail where it wants, plays the guest's side
// (here its agent), and reads back what was called.
func Example() {
	ctx := context.Background()
	h := fake.New()
	if _, err := h.Define(ctx, `<domain type="qemu"><name>default_web</name></domain>`); err != nil {
		panic(err)
	}
	h.FailNext("Start", errors.New("out of memory"))
	fmt.Println(h.Start(ctx, "default_web", hypervisor.StartOptions{}))
	fmt.Println(h.Start(ctx, "default_web", hypervisor.StartOptions{}))

	h.SetGuestAgent("default_web", fake.GuestAgentReplies(map[string]string{"guest-ping": "{}"}))
	fmt.Println(h.GuestAgentCommand(ctx, "default_web", `{"execute":"guest-ping"}`))
	fmt.Println(h.Calls())
	// Output:
	// out of memory
	// <nil>
	// {"return":{}} <nil>
	// [Define default_web Start default_web Start default_web GuestAgentCommand default_web]
}
