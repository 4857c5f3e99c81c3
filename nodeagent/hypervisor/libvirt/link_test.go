package libvirt

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// TestSetQEMULink: a NIC the domain's definition does not list (QEMU
// arguments, as the passtBinding's) goes down and up through QEMU's
// monitor, and the guest sees its carrier follow; an unknown device and a
// shut-off domain are refused.
func TestSetQEMULink(t *testing.T) {
	uri := requireQEMU(t)
	guest, initrd := requireAgentGuest(t)
	h := newTestHypervisor(t, uri)

	xml, name := tinyGuestXML(t, tinyGuestVMI("link-"+randomSuffix(t), types.UID(randomUUID(t))), guest.Kernel, initrd, t.TempDir())
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	dom.QEMUCommandline = &libvirtxml.DomainQEMUCommandline{Args: []libvirtxml.DomainQEMUCommandlineArg{
		{Value: "-netdev"}, {Value: "hubport,id=testnet,hubid=0"},
		{Value: "-device"}, {Value: "virtio-net-pci,netdev=testnet,id=testnic,romfile=,bus=pci.0,addr=0x1e"}, // a slot libvirt leaves free (domainxml's passt NIC's)
	}}
	xml, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	if err := h.SetQEMULink(ctx, name, "testnic", false); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("SetQEMULink on a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitAgent(t, h, name)
	carrier := func(want string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = strings.TrimSpace(agentExec(t, h, name, "cat /sys/class/net/eth0/carrier")); got == want {
				return
			}
		}
		t.Fatalf("the guest's eth0 carrier is %q, want %q", got, want)
	}
	carrier("1")
	if err := h.SetQEMULink(ctx, name, "no-such-nic", false); err == nil || !strings.Contains(err.Error(), "no-such-nic") {
		t.Errorf("SetQEMULink of an unknown device: %v, want QEMU's error naming it", err)
	}
	if err := h.SetQEMULink(ctx, name, "testnic", false); err != nil {
		t.Fatalf("SetQEMULink down: %v", err)
	}
	carrier("0")
	if err := h.SetQEMULink(ctx, name, "testnic", true); err != nil {
		t.Fatalf("SetQEMULink up: %v", err)
	}
	carrier("1")
}
