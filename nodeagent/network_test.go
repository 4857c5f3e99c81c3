package nodeagent

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
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
	}, {
		name:  "a layer-2 secondary network: no lease, joined by MAC, the guest's own addresses",
		wired: []network.Result{masq, {Interface: "blue", MAC: "52:54:00:09:09:09"}},
		guest: []v1.VirtualMachineInstanceNetworkInterface{guestEth0, {InterfaceName: "eth1", MAC: "52:54:00:09:09:09", IP: "192.168.7.2", IPs: []string{"192.168.7.2"}, InfoSource: InfoSourceGuestAgent}},
		want: []v1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", InterfaceName: "eth0", MAC: "52:54:00:01:02:03", IP: "10.244.0.7", IPs: []string{"10.244.0.7", "fd00::7"}, InfoSource: "domain, guest-agent"},
			{Name: "blue", InterfaceName: "eth1", MAC: "52:54:00:09:09:09", IP: "192.168.7.2", IPs: []string{"192.168.7.2"}, InfoSource: "domain, guest-agent"},
		},
	}, {
		name:  "a layer-2 secondary network without a guest agent",
		wired: []network.Result{{Interface: "blue", MAC: "52:54:00:09:09:09"}},
		want:  []v1.VirtualMachineInstanceNetworkInterface{{Name: "blue", MAC: "52:54:00:09:09:09", InfoSource: "domain"}},
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
	live := &client.Status{Defined: true, Started: true, State: hypervisor.StateRunning, Reason: hypervisor.ReasonBooted}
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

// TestHostNetworkLauncherFails: a launcher in the agent's own network
// namespace (a host-network pod; here the test's process) gets no pod
// network interface wired: the VMI fails with NetworkSetupFailed and an
// event, naming the interface, instead of sitting Scheduled.
func TestHostNetworkLauncherFails(t *testing.T) {
	dir, err := os.MkdirTemp("", "ngn") // short: the launcher's socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	share := filepath.Join(dir, "share")
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "0d4a0f4e-2222-4222-8333-944455556666",
			Labels: map[string]string{v1.NodeNameLabel: "node01"}},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Devices: v1.Devices{Interfaces: []v1.Interface{{Name: "default",
				InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}},
		}, Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01"},
	}
	h := hvfake.New()
	agenttest.RunLauncher(t, dir, share, h, vmi)
	vmClient := vmfake.NewSimpleClientset(vmi.DeepCopy())
	events := record.NewFakeRecorder(10)
	a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(), ShareDir: share,
		KubeletPodsDir: filepath.Join(dir, "pods"), Recorder: events, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.informer.GetIndexer().Add(vmi); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, func() bool { _, err := a.client(vmi.UID).Ping(ctx); return err == nil })
	if _, err := a.sync(ctx, "ns/vm1"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := got.VMICondition(v1.VirtualMachineInstanceSynchronized)
	if got.Status.Phase != v1.Failed || got.Status.Reason != ReasonNetworkSetupFailed || cond == nil ||
		!strings.Contains(cond.Message, "spec.domain.devices.interfaces[0] (default)") || !strings.Contains(cond.Message, "hostNetwork") {
		t.Errorf("status %+v, want Failed/NetworkSetupFailed with a condition naming interfaces[0] and the host network", got.Status)
	}
	if _, defined := h.XML("ns_vm1"); defined {
		t.Error("the domain was defined although its network could not be wired")
	}
	select {
	case e := <-events.Events:
		if !strings.Contains(e, ReasonNetworkSetupFailed) || !strings.Contains(e, "interfaces[0]") {
			t.Errorf("event %q, want NetworkSetupFailed naming the interface", e)
		}
	default:
		t.Error("no event")
	}
}

// TestLostAdvertiser: a restarted agent wires again exactly the running
// VMIs on its node with an IPv6 address on a masquerade or bridge
// interface that it has not wired itself.
func TestLostAdvertiser(t *testing.T) {
	vmi := func(node string, masquerade bool, ips ...string) *v1.VirtualMachineInstance {
		v := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
		iface := v1.Interface{Name: "default"}
		if masquerade {
			iface.Masquerade = &v1.InterfaceMasquerade{}
		} else {
			iface.Bridge = &v1.InterfaceBridge{}
		}
		v.Spec.Domain.Devices.Interfaces = []v1.Interface{iface}
		v.Status.NodeName = node
		v.Status.Interfaces = []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", IPs: ips}}
		return v
	}
	for _, tc := range []struct {
		name  string
		vmi   *v1.VirtualMachineInstance
		wired bool
		want  bool
	}{
		{"masquerade with IPv6, not wired here", vmi("node1", true, "10.244.0.7", "fd00:10:244::7"), false, true},
		{"already wired by this agent", vmi("node1", true, "10.244.0.7", "fd00:10:244::7"), true, false},
		{"IPv4 only", vmi("node1", true, "10.244.0.7"), false, false},
		{"bridge binding with IPv6", vmi("node1", false, "10.244.0.7", "fd00:10:244::7"), false, true},
		{"bridge binding, IPv4 only", vmi("node1", false, "10.244.0.7"), false, false},
		{"another node's", vmi("node2", true, "10.244.0.7", "fd00:10:244::7"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{cfg: Config{NodeName: "node1"}, networks: map[types.UID][]network.Result{}}
			if tc.wired {
				a.networks["u1"] = []network.Result{{Interface: "default"}}
			}
			if got := a.lostAdvertiser(tc.vmi); got != tc.want {
				t.Errorf("lostAdvertiser = %v, want %v", got, tc.want)
			}
		})
	}
}
