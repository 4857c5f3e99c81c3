package localnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes/fake"

	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/localnode"
)

// Start a kubelet stand-in for node01 and give its share directory to the
// node agent (nodeagent.Config.ShareDir). Here the launcher and the guest
// are placeholders; `make demo` passes _output/bin/virt-launcher and
// _output/guest, and a Domains from nodeagent/hypervisor/libvirt (or none: virsh).
func Example() {
	guest, _ := os.MkdirTemp("", "guest")
	defer os.RemoveAll(guest)
	for _, f := range []string{localnode.Kernel, localnode.IdleInitramfs} {
		_ = os.WriteFile(filepath.Join(guest, f), []byte("placeholder"), 0o644)
	}
	node, err := localnode.Start(context.Background(), localnode.Options{
		Kube:           fake.NewClientset(),
		NodeName:       "node01",
		LauncherBinary: "/bin/true",
		GuestDir:       guest,
		Domains:        hvfake.New(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(filepath.Base(node.ShareDir()))
	if err := node.Stop(); err != nil {
		fmt.Println(err)
	}
	_, err = os.Stat(node.BaseDir())
	fmt.Println("base dir removed:", os.IsNotExist(err))
	// Output:
	// share
	// base dir removed: true
}
