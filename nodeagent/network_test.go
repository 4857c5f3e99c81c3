package nodeagent

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/network"
	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestNetworkInterfaces(t *testing.T) {
	masq := network.Result{Interface: "default", PodIPs: []string{"10.244.0.7", "fd00::7"},
		Lease: dhcp.Lease{IP: net.IPNet{IP: net.IPv4(10, 0, 2, 2), Mask: net.CIDRMask(24, 32)}}}
	bridge := network.Result{Interface: "default", MAC: "02:00:00:aa:bb:cc", PodIPs: []string{"10.244.0.8"},
		Lease: dhcp.Lease{IP: net.IPNet{IP: net.IPv4(10, 244, 0, 8), Mask: net.CIDRMask(24, 32)}}}
	guestEth0 := v1.VirtualMachineInstanceNetworkInterface{InterfaceName: "eth0", MAC: "52:54:00:01:02:03", IP: "10.0.2.2", IPs: []string{"10.0.2.2"}, InfoSource: InfoSourceGuestAgent}
	guestEth1 := v1.VirtualMachineInstanceNetworkInterface{InterfaceName: "eth1", MAC: "52:54:00:09:09:09", InfoSource: InfoSourceGuestAgent}
	for _, tc := range []struct {
		name  string
		wired []network.Result
		guest []v1.VirtualMachineInstanceNetworkInterface
		want  []v1.VirtualMachineInstanceNetworkInterface
	}{{
		name:  "masquerade without a guest agent: the pod's addresses from the domain",
		wired: []network.Result{masq},
		want:  []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "10.244.0.7", IPs: []string{"10.244.0.7", "fd00::7"}, InfoSource: "domain"}},
	}, {
		name:  "masquerade with the guest agent: joined by the DHCP address, pod IP kept, other guest devices after",
		wired: []network.Result{masq},
		guest: []v1.VirtualMachineInstanceNetworkInterface{guestEth1, guestEth0},
		want: []v1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", InterfaceName: "eth0", MAC: "52:54:00:01:02:03", IP: "10.244.0.7", IPs: []string{"10.244.0.7", "fd00::7"}, InfoSource: "domain, guest-agent"},
			guestEth1,
		},
	}, {
		name:  "bridge: the wired MAC wins",
		wired: []network.Result{bridge},
		guest: []v1.VirtualMachineInstanceNetworkInterface{{InterfaceName: "eth0", MAC: "02:00:00:aa:bb:cc", IP: "10.244.0.8", IPs: []string{"10.244.0.8"}, InfoSource: InfoSourceGuestAgent}},
		want:  []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", InterfaceName: "eth0", MAC: "02:00:00:aa:bb:cc", IP: "10.244.0.8", IPs: []string{"10.244.0.8"}, InfoSource: "domain, guest-agent"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, networkInterfaces(tc.wired, tc.guest)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCalculateStatusNetwork: a wiring failure fails a Scheduled VMI with
// the reason and a Synchronized=False condition naming the interface; a
// running VMI shows its wired interfaces, and a stored joined list is kept
// when the guest agent has nothing new.
func TestCalculateStatusNetwork(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	scheduled := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"}}
	err := &networkError{errors.New(`spec.domain.devices.interfaces[0] (default): binding passt is not supported`)}
	got := calculateStatus(scheduled, observation{now: now, networkErr: err})
	cond := (&v1.VirtualMachineInstance{Status: got}).VMICondition(v1.VirtualMachineInstanceSynchronized)
	if got.Phase != v1.Failed || got.Reason != ReasonNetworkSetupFailed || cond == nil || cond.Status != corev1.ConditionFalse ||
		!strings.Contains(cond.Message, "spec.domain.devices.interfaces[0]") {
		t.Errorf("after a wiring failure: phase %s reason %s condition %+v", got.Phase, got.Reason, cond)
	}

	wired := []network.Result{{Interface: "default", PodIPs: []string{"10.244.0.7"},
		Lease: dhcp.Lease{IP: net.IPNet{IP: net.IPv4(10, 0, 2, 2), Mask: net.CIDRMask(24, 32)}}}}
	live := &launcher.Status{Defined: true, Started: true, State: hypervisor.StateRunning, Reason: hypervisor.ReasonBooted}
	got = calculateStatus(scheduled, observation{now: now, launcher: live, network: wired})
	if len(got.Interfaces) != 1 || got.Interfaces[0].IP != "10.244.0.7" {
		t.Errorf("running with a wired interface: interfaces %+v", got.Interfaces)
	}
	joined := []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", InterfaceName: "eth0", IP: "10.244.0.7", IPs: []string{"10.244.0.7"}, InfoSource: "domain, guest-agent"}}
	running := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "n", Interfaces: joined}}
	got = calculateStatus(running, observation{now: now, launcher: live, network: wired})
	if diff := cmp.Diff(joined, got.Interfaces); diff != "" {
		t.Errorf("a sync without guest agent news changed the joined interfaces (-want +got):\n%s", diff)
	}
}
