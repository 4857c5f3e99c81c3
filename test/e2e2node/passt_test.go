package e2e2node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestPasstLiveMigration (#39 item 2): a guest on KubeVirt's passtBinding is
// LiveMigratable and migrates to the other node. The target launcher starts
// its own passt before the guest arrives (the incoming QEMU connects to it),
// then takes the guest's NIC down and up; the guest asks for a lease again,
// gets the target pod's address from that passt, and answers HTTP on it.
// Its connections through the source pod end with that pod, as with
// KubeVirt's link refresh.
func TestPasstLiveMigration(t *testing.T) {
	c := suite.Need(t)
	vm := netVM(t, "vm-passt-mig", c.Env.Nodes[0].Name)
	vm.Spec.Template.Spec.NodeSelector = nil // it must be free to move
	iface := &vm.Spec.Template.Spec.Domain.Devices.Interfaces[0]
	iface.InterfaceBindingMethod = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}
	iface.Ports = []v1.Port{{Port: 80}}
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running with an IP, LiveMigratable", func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceIsMigratable)
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != "" &&
			cond != nil && cond.Status == corev1.ConditionTrue
	})
	uid, source, ip := vmi.UID, vmi.Status.NodeName, vmi.Status.Interfaces[0].IP
	suite.HTTPGetUntil(t, guestURL(ip, "/"), "vmkit guest", 90*time.Second) // passt gives no host name

	began := time.Now()
	migrate(t, c, "mig-passt", vm.Name, true)
	took := time.Since(began)
	v := framework.WaitVMI(t, c, vm.Name, "on the other node with its new pod's IP", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.NodeName != source && v.Status.Phase == v1.Running &&
			len(v.Status.Interfaces) > 0 && v.Status.Interfaces[0].IP != "" && v.Status.Interfaces[0].IP != ip
	})
	if v.UID != uid {
		t.Errorf("after the migration the VMI has UID %s, was %s", v.UID, uid)
	}
	newIP := v.Status.Interfaces[0].IP
	// The guest took the new address by DHCP on the target: its console
	// there says so (the target keeps what the guest printed since it
	// arrived).
	marker := "GUEST-DHCP-BOUND dev=eth0 ip=" + newIP + " "
	suite.WaitFor(t, "the guest bound "+newIP+" on the target", 90*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		lines, err := c.Console(ctx, "default", vm.Name, marker)
		if err != nil {
			return false, err.Error()
		}
		return true, strings.Join(lines, "\n")
	})
	got := suite.HTTPGetUntil(t, guestURL(newIP, "/"), "vmkit guest", 60*time.Second)
	t.Logf("passt guest migrated %s -> %s in %v (created -> Succeeded); it answers at %s %v after the migration was created: %q",
		source, v.Status.NodeName, took.Round(time.Millisecond), newIP, time.Since(began).Round(time.Millisecond), strings.TrimSpace(got))
}
