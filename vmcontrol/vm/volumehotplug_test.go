package vm

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestDeclarativeVolumeHotplug: a hotpluggable claim added to a running
// VM's template (with its disk) is given to the running instance, and one
// removed is taken away, without RestartRequired; a volume that is not
// hotpluggable still needs a restart and is left alone.
func TestDeclarativeVolumeHotplug(t *testing.T) {
	ctx := context.Background()
	vm := newVM(v1.RunStrategyAlways)
	h := newRevisionHarness(t, vm)
	h.sync(t)
	vmi, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := len(vmi.Spec.Volumes)
	vmi.Status.Phase = v1.Running
	if _, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	claim := func(name string, hotplug bool) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			Hotpluggable: hotplug, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-claim"}}}}
	}
	change := func(f func(*v1.VirtualMachineInstanceSpec)) (restartRequired bool, vols []string) {
		t.Helper()
		vm, err := h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vm.Generation++
		f(&vm.Spec.Template.Spec)
		if _, err := h.client.KubevirtV1().VirtualMachines("ns").Update(ctx, vm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.refresh(t)
		h.sync(t)
		vm, _ = h.client.KubevirtV1().VirtualMachines("ns").Get(ctx, "vm", metav1.GetOptions{})
		for _, c := range vm.Status.Conditions {
			restartRequired = restartRequired || c.Type == v1.VirtualMachineRestartRequired
		}
		vmi, _ := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
		for _, v := range vmi.Spec.Volumes[base:] {
			vols = append(vols, v.Name)
		}
		if len(vmi.Spec.Volumes) != len(vmi.Spec.Domain.Devices.Disks) {
			t.Errorf("instance has %d volumes and %d disks", len(vmi.Spec.Volumes), len(vmi.Spec.Domain.Devices.Disks))
		}
		h.refresh(t)
		return restartRequired, vols
	}
	scsi := func(name string) v1.Disk {
		return v1.Disk{Name: name, DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}}
	}
	rr, vols := change(func(s *v1.VirtualMachineInstanceSpec) {
		s.Volumes = append(s.Volumes, claim("data", true))
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, scsi("data"))
	})
	if rr || len(vols) != 1 || vols[0] != "data" {
		t.Errorf("hotpluggable claim added: RestartRequired %v, instance's added volumes %v; want false, [data]", rr, vols)
	}
	rr, vols = change(func(s *v1.VirtualMachineInstanceSpec) {
		s.Volumes = s.Volumes[:len(s.Volumes)-1]
		s.Domain.Devices.Disks = s.Domain.Devices.Disks[:len(s.Domain.Devices.Disks)-1]
	})
	if rr || len(vols) != 0 {
		t.Errorf("hotpluggable claim removed: RestartRequired %v, instance's added volumes %v; want false, []", rr, vols)
	}
	rr, vols = change(func(s *v1.VirtualMachineInstanceSpec) {
		s.Volumes = append(s.Volumes, claim("cold", false))
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, scsi("cold"))
	})
	if !rr || len(vols) != 0 {
		t.Errorf("claim that is not hotpluggable added: RestartRequired %v, instance's added volumes %v; want true, []", rr, vols)
	}
}
