package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestPresets: a VirtualMachineInstancePreset selecting a VM's template
// labels is applied by virt-api's mutating webhook (installed by the
// operator) to the VMI the VM controller creates: the guest's QEMU runs with
// the preset's two cores and the VMI carries the preset's annotation.
func TestPresets(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	const label = "e2e.vmkit.io/preset"
	preset := &v1.VirtualMachineInstancePreset{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-two-cores", Namespace: "default"},
		Spec: v1.VirtualMachineInstancePresetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{label: "two-cores"}},
			Domain:   &v1.DomainSpec{CPU: &v1.CPU{Cores: 2}},
		},
	}
	presets := c.Client.KubevirtV1().VirtualMachineInstancePresets("default")
	if _, err := presets.Create(ctx, preset, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := presets.Delete(ctx, preset.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})

	vm := tinyVM(t, "vm-preset", v1.RunStrategyAlways)
	if vm.Spec.Template.ObjectMeta.Labels == nil {
		vm.Spec.Template.ObjectMeta.Labels = map[string]string{}
	}
	vm.Spec.Template.ObjectMeta.Labels[label] = "two-cores"
	vm.Spec.Template.Spec.Domain.CPU = nil
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, "vm-preset", "Running", running)
	if got := vmi.Annotations["virtualmachinepreset.kubevirt.io/"+preset.Name]; got != "kubevirt.io/v1" {
		t.Errorf("VMI annotation virtualmachinepreset.kubevirt.io/%s = %q, want kubevirt.io/v1", preset.Name, got)
	}
	if cpu := vmi.Spec.Domain.CPU; cpu == nil || cpu.Cores != 2 {
		t.Errorf("VMI cpu %+v, want the preset's 2 cores", cpu)
	}
	if smp := qemuSMP(t, "vm-preset"); !strings.HasPrefix(smp, "2,") || !strings.Contains(smp, "cores=2") {
		t.Errorf("QEMU -smp %q, want the preset's 2 cores", smp)
	}
}
