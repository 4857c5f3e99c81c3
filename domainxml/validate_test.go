package domainxml

import (
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestValidateRandomVMIs: of 3,000 random VMIs (the fuzz target's
// generator, which sets every field Convert reads, sometimes to values it
// must reject), none that Validate accepts fails Convert with what a node
// supplies (its CPUs, the block devices of LUN volumes) and the API server
// assigns (name, UID). That is the
// property the VMI controller and virt-api rely on: a VMI that passes never
// gets a launcher pod only to fail its domain conversion there.
func TestValidateRandomVMIs(t *testing.T) {
	const n = 3000
	accepted, rejected := 0, 0
	for seed := uint64(0); seed < n; seed++ {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		vmi, opts := randomCase(r)
		errs := Validate(vmi, opts.Emulation)
		node := opts
		node.CPUSet = nil
		for i := range uint(4097) {
			node.CPUSet = append(node.CPUSet, i)
		}
		node.Disks = map[string]DiskSource{}
		for name, src := range opts.Disks {
			node.Disks[name] = src
		}
		for _, d := range vmi.Spec.Domain.Devices.Disks {
			if d.LUN != nil {
				node.Disks[d.Name] = DiskSource{Path: "/dev/" + d.Name, Block: true}
			}
		}
		// The API server assigns the name and UID before anything runs.
		if vmi.Name == "" {
			vmi.Name = "assigned"
		}
		if vmi.UID == "" {
			vmi.UID = "5d0a7e39-8b0f-4c8e-bf0e-2a33c8f6d1a2"
		}
		_, err := Convert(vmi, node)
		switch {
		case len(errs) == 0 && err != nil:
			t.Errorf("seed %d: Validate accepts a VMI Convert rejects: %v", seed, err)
		case len(errs) > 0:
			rejected++
		default:
			accepted++
		}
	}
	t.Logf("%d random VMIs: %d accepted (all convert), %d rejected", n, accepted, rejected)
	if accepted < n/10 || rejected < n/100 {
		t.Errorf("the generator no longer exercises both sides: %d accepted, %d rejected", accepted, rejected)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace = "vm", "default"
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "floppy"}}}}
	vmi.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}}}
	errs := Validate(vmi, true)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.domain.devices.disks[0].disk.bus") || strings.Contains(errs[0].Error(), "null") {
		t.Fatalf("Validate = %v, want one error naming spec.domain.devices.disks[0].disk.bus", errs)
	}
	vmi.Spec.Domain.Devices.Disks[0].Disk.Bus = v1.DiskBusVirtio
	if errs := Validate(vmi, true); len(errs) != 0 {
		t.Fatalf("Validate of a valid VMI = %v", errs)
	}
}
