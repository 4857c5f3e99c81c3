package launcher_test

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// A launcher runs one VMI's domain; the node agent drives it through its
// command socket. Here the hypervisor is the in-memory fake; virt-launcher
// passes libvirt's.
func Example() {
	dir, _ := os.MkdirTemp("", "launcher-example")
	defer os.RemoveAll(dir)
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo", UID: "6f1f6c1e-0000-4000-8000-000000000001"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}},
	}
	l, err := launcher.New(launcher.Config{
		Name: vmi.Name, Namespace: vmi.Namespace, UID: string(vmi.UID),
		ShareDir: dir, EphemeralDiskDir: dir + "/eph", PrivateDir: dir + "/priv",
		Hypervisor: hvfake.New(), PollInterval: 10 * time.Millisecond,
		Emulation: true, // the fake hypervisor has no KVM
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ended := make(chan client.Status)
	go func() {
		final, _ := l.Run(context.Background())
		ended <- final
	}()

	ctx := context.Background()
	c := client.New(client.SocketPath(dir, string(vmi.UID)))
	defer c.Close()
	for _, err := c.Ping(ctx); err != nil; _, err = c.Ping(ctx) {
		time.Sleep(5 * time.Millisecond) // the launcher is starting
	}
	st, err := c.Sync(ctx, vmi)
	fmt.Println("sync:", st.Domain, st.State, err)
	st, _ = c.Pause(ctx)
	fmt.Println("pause:", st.State, st.Reason)
	st, _ = c.Unpause(ctx)
	fmt.Println("unpause:", st.State, st.Reason)
	_, _ = c.Shutdown(ctx)
	final := <-ended
	fmt.Println("final:", final.State, final.Reason, "succeeded:", final.Succeeded())
	// Output:
	// sync: default_demo Running <nil>
	// pause: Paused User
	// unpause: Running Unpaused
	// final: Shutoff Shutdown succeeded: true
}
