package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/netnames"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

var nadResource = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// createBridgeNAD creates a NetworkAttachmentDefinition in default for
// the CNI bridge plugin on host bridge hostBridge, with host-local IPAM on
// subnet (none when empty: a layer-2 network). Its cleanup deletes it and
// the host bridge the plugin made.
func createBridgeNAD(t *testing.T, c *cluster.Cluster, name, hostBridge, subnet string) {
	t.Helper()
	conf := map[string]any{"cniVersion": "0.3.1", "name": name, "type": "bridge", "bridge": hostBridge, "ipam": map[string]any{}}
	if subnet != "" {
		conf["ipam"] = map[string]any{"type": "host-local", "subnet": subnet, "dataDir": t.TempDir()}
	}
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"config": string(b)},
	}}
	if _, err := dyn.Resource(nadResource).Namespace("default").Create(t.Context(), nad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NetworkAttachmentDefinition %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(nadResource).Namespace("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		if out, err := exec.Command("ip", "link", "del", hostBridge).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			t.Errorf("ip link del %s: %v: %s", hostBridge, err, out)
		}
	})
}

// TestSecondaryNetworks (#39 item 6): VMs on Multus secondary networks,
// as KubeVirt users attach them. The local cluster runs Multus (built from
// the Go module proxy) in front of the pod network; two
// NetworkAttachmentDefinitions use the CNI bridge plugin, one with
// host-local IPAM and one without (a layer-2 network). The node agent
// wires each with KubeVirt's bridge binding: the guest gets the address
// Multus' IPAM gave the pod interface by DHCP, and the two guests talk to
// each other over the secondary network, not the pod network.
func TestSecondaryNetworks(t *testing.T) {
	c := suite.Need(t)
	createBridgeNAD(t, c, "e2e-sec", "vmkit-e2e-sec", "10.250.0.0/24")
	createBridgeNAD(t, c, "e2e-l2", "vmkit-e2e-l2", "")
	_, secNet, _ := net.ParseCIDR("10.250.0.0/24")

	withSecondary := func(name string, nets ...string) *v1.VirtualMachine {
		vm := framework.ExampleVM(t, "vm-net.yaml", name, v1.RunStrategyAlways)
		spec := &vm.Spec.Template.Spec
		for _, n := range nets {
			spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, v1.Interface{Name: n, InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}})
			spec.Networks = append(spec.Networks, v1.Network{Name: n, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "e2e-" + n}}})
		}
		return vm
	}
	a, b := withSecondary("vm-sec-a", "sec", "l2"), withSecondary("vm-sec-b", "sec")
	framework.CreateVM(t, c, a)
	framework.CreateVM(t, c, b)

	secIP := map[string]string{}
	podIP := map[string]string{}
	for _, vm := range []*v1.VirtualMachine{a, b} {
		vmi := framework.WaitVMI(t, c, vm.Name, "an address on the secondary network in status.interfaces", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi.Status.Phase == v1.Running && ifaceIP(vmi, "sec") != ""
		})
		secIP[vm.Name] = ifaceIP(vmi, "sec")
		if !secNet.Contains(net.ParseIP(secIP[vm.Name])) {
			t.Errorf("VMI %s: interface sec has %s, not an address of the NetworkAttachmentDefinition's subnet %s", vm.Name, secIP[vm.Name], secNet)
		}
		pod := launcherPod(t, c, vmi)
		podIP[vm.Name] = pod.Status.PodIP
		var selected []map[string]any
		if err := json.Unmarshal([]byte(pod.Annotations["k8s.v1.cni.cncf.io/networks"]), &selected); err != nil || len(selected) == 0 {
			t.Fatalf("launcher pod %s: networks annotation %q: %v", pod.Name, pod.Annotations["k8s.v1.cni.cncf.io/networks"], err)
		}
		// Multus reports what it attached on the pod.
		var status []struct {
			Name, Interface string
			IPs             []string
		}
		raw := pod.Annotations["k8s.v1.cni.cncf.io/network-status"]
		if err := json.Unmarshal([]byte(raw), &status); err != nil {
			t.Fatalf("launcher pod %s: Multus' network-status %q: %v", pod.Name, raw, err)
		}
		found := false
		for _, s := range status {
			found = found || s.Name == "default/e2e-sec" && s.Interface == netnames.SecondaryInterface("sec") && slices.Contains(s.IPs, secIP[vm.Name])
		}
		if !found {
			t.Errorf("launcher pod %s: Multus' network-status names no interface %s of default/e2e-sec with %s: %s", pod.Name, netnames.SecondaryInterface("sec"), secIP[vm.Name], raw)
		}
	}

	// A reaches B over the secondary network, from its address there
	// (masquerade on the pod network would show the pod's address).
	target := framework.GuestURL(secIP[b.Name], 80, "/cgi-bin/client")
	suite.HTTPGetUntil(t, framework.GuestURL(podIP[a.Name], 80, "/cgi-bin/fetch?"+target), "client "+secIP[a.Name]+"\n", 90*time.Second)

	// The layer-2 network: a NIC on the bridge and no address from vmkit;
	// the guest agent names the guest's device by its MAC.
	vmi := framework.WaitVMI(t, c, a.Name, "interface l2 joined to the guest's device by MAC", func(vmi *v1.VirtualMachineInstance) bool {
		i := ifaceStatus(vmi, "l2")
		return i != nil && i.MAC != "" && i.InterfaceName != ""
	})
	if l2 := ifaceStatus(vmi, "l2"); l2.IP != "" && secNet.Contains(net.ParseIP(l2.IP)) {
		t.Errorf("VMI %s: the layer-2 interface has %s, an address of the other network", a.Name, l2.IP)
	}
	t.Logf("secondary network addresses: %v; %s's layer-2 interface: %+v", secIP, a.Name, *ifaceStatus(vmi, "l2"))
}

func ifaceStatus(vmi *v1.VirtualMachineInstance, name string) *v1.VirtualMachineInstanceNetworkInterface {
	for i := range vmi.Status.Interfaces {
		if vmi.Status.Interfaces[i].Name == name {
			return &vmi.Status.Interfaces[i]
		}
	}
	return nil
}

func ifaceIP(vmi *v1.VirtualMachineInstance, name string) string {
	if i := ifaceStatus(vmi, name); i != nil {
		return i.IP
	}
	return ""
}
