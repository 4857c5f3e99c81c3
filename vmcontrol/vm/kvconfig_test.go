package vm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestSyncAppliesKubeVirtConfiguration: the VM controller takes the
// defaults the KubeVirt CR configures from its informer at each start, so
// an edit of the CR applies to the next start without a restart, and a
// setting it cannot apply is a Failure condition naming the CR's field.
func TestSyncAppliesKubeVirtConfiguration(t *testing.T) {
	vm := newVM(v1.RunStrategyAlways)
	guest := resource.MustParse("1Gi")
	vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: &guest}
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.Configuration = v1.KubeVirtConfiguration{
		CPUModel:               "Westmere",
		MachineType:            "pc-q35-7.2",
		DeveloperConfiguration: &v1.DeveloperConfiguration{MemoryOvercommit: 200},
		Network:                &v1.NetworkConfiguration{DefaultNetworkInterface: "masquerade"},
	}
	client := fake.NewSimpleClientset(vm)
	f := externalversions.NewSharedInformerFactory(client, 0)
	kubevirts := f.Kubevirt().V1().KubeVirts().Informer()
	c, err := New(Config{Client: client.KubevirtV1(), VMs: f.Kubevirt().V1().VirtualMachines().Informer(),
		VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer(), KubeVirts: kubevirts})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Kubevirt().V1().VirtualMachines().Informer().GetIndexer().Add(vm)
	_ = kubevirts.GetIndexer().Add(kv)
	c.now = func() time.Time { return now }
	c.jitter = func() float64 { return 0 }
	ctx := context.Background()

	if err := c.sync(ctx, "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vmi, err := client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := vmi.Spec.Domain.CPU; got == nil || got.Model != "Westmere" {
		t.Errorf("cpu %+v, want the CR's model Westmere", got)
	}
	if got := vmi.Spec.Domain.Machine.Type; got != "pc-q35-7.2" {
		t.Errorf("machine type %q, want the CR's pc-q35-7.2", got)
	}
	if got := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("memory request %s, want 512Mi (1Gi at 200%% overcommit)", got.String())
	}
	if ifs := vmi.Spec.Domain.Devices.Interfaces; len(ifs) != 1 || ifs[0].Masquerade == nil {
		t.Errorf("interfaces %+v, want the CR's default masquerade", ifs)
	}

	// The CR changes: the next start gets the new model, with no restart.
	// observe copies the stored VM into the cache with a new version, as
	// the informer would see it, and forgets the VM's instance as if it
	// had stopped.
	rv := 0
	observe := func() {
		t.Helper()
		stored, err := client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv++
		stored.ResourceVersion = fmt.Sprint(rv)
		_ = f.Kubevirt().V1().VirtualMachines().Informer().GetIndexer().Update(stored)
		_ = client.KubevirtV1().VirtualMachineInstances("ns").Delete(ctx, "vm", metav1.DeleteOptions{})
		c.exp.Forget("ns/vm")
	}
	observe()
	edited := kv.DeepCopy()
	edited.Spec.Configuration.CPUModel = "Haswell-noTSX"
	edited.Spec.Configuration.Network.DefaultNetworkInterface = "carrier-pigeon"
	_ = kubevirts.GetIndexer().Update(edited)
	// The sync fails, so it is retried with back-off: an edit of the CR
	// does not enqueue VMs.
	if err := c.sync(ctx, "ns/vm"); err == nil {
		t.Fatal("sync succeeded under a configuration that cannot be applied")
	}
	if _, err := client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{}); err == nil {
		t.Fatal("a VMI was created under a configuration that cannot be applied")
	}
	stored, err := client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := failure(stored.Status)
	if cond == nil || !strings.Contains(cond.Message, `KubeVirt kubevirt/kubevirt: spec.configuration.network.defaultNetworkInterface: "carrier-pigeon"`) {
		t.Fatalf("Failure condition %+v, want one naming the KubeVirt CR's field", cond)
	}

	edited.Spec.Configuration.Network.DefaultNetworkInterface = ""
	_ = kubevirts.GetIndexer().Update(edited)
	observe()
	if err := c.sync(ctx, "ns/vm"); err != nil {
		t.Fatal(err)
	}
	vmi, err = client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no VMI after the configuration was fixed: %v", err)
	}
	if vmi.Spec.Domain.CPU.Model != "Haswell-noTSX" || vmi.Spec.Domain.Devices.Interfaces[0].Bridge == nil {
		t.Errorf("cpu %+v interfaces %+v, want the edited CR's Haswell-noTSX and the default bridge", vmi.Spec.Domain.CPU, vmi.Spec.Domain.Devices.Interfaces)
	}
}
