package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertMemory(t *testing.T) {
	memory := func(m v1.Memory) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Memory = &m }
	}
	onlyLimit := func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Resources = v1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1G")}}
	}
	for _, tc := range []struct {
		name        string
		vmi         *v1.VirtualMachineInstance
		wantMemory  *libvirtxml.DomainMemory
		wantBacking *libvirtxml.DomainMemoryBacking
		wantErr     string
	}{{
		name:       "the memory request",
		vmi:        newVMI(),
		wantMemory: &libvirtxml.DomainMemory{Value: 131072, Unit: "KiB"},
	}, {
		name:       "guest memory beats the request",
		vmi:        newVMI(memory(v1.Memory{Guest: quantity("1Gi")})),
		wantMemory: &libvirtxml.DomainMemory{Value: 1 << 20, Unit: "KiB"},
	}, {
		name:       "the limit when nothing else is set, rounded up to KiB",
		vmi:        newVMI(onlyLimit),
		wantMemory: &libvirtxml.DomainMemory{Value: 976563, Unit: "KiB"},
	}, {
		name:    "no memory at all",
		vmi:     newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Resources = v1.ResourceRequirements{} }),
		wantErr: "spec.domain.resources.requests.memory: required when spec.domain.memory.guest is unset",
	}, {
		name:    "too little",
		vmi:     newVMI(memory(v1.Memory{Guest: quantity("512Ki")})),
		wantErr: "spec.domain.memory.guest: 512Ki is less than the minimum of 1Mi",
	}, {
		name:    "absurdly much",
		vmi:     newVMI(memory(v1.Memory{Guest: quantity("1Ei")})),
		wantErr: "spec.domain.memory.guest: 1Ei is more than the maximum of 64Ti",
	}, {
		name:       "huge pages",
		vmi:        newVMI(memory(v1.Memory{Guest: quantity("2Gi"), Hugepages: &v1.Hugepages{PageSize: "1Gi"}})),
		wantMemory: &libvirtxml.DomainMemory{Value: 2 << 20, Unit: "KiB"},
		wantBacking: &libvirtxml.DomainMemoryBacking{MemoryHugePages: &libvirtxml.DomainMemoryHugepages{
			Hugepages: []libvirtxml.DomainMemoryHugepage{{Size: 1 << 20, Unit: "KiB"}},
		}},
	}, {
		name:    "memory not a multiple of the page size",
		vmi:     newVMI(memory(v1.Memory{Guest: quantity("1025Mi"), Hugepages: &v1.Hugepages{PageSize: "2Mi"}})),
		wantErr: "spec.domain.memory.guest: 1025Mi is not a multiple of the huge page size 2Mi",
	}, {
		name:    "page size not a power of two",
		vmi:     newVMI(memory(v1.Memory{Hugepages: &v1.Hugepages{PageSize: "3Mi"}})),
		wantErr: "spec.domain.memory.hugepages.pageSize: 3Mi is not a power of two",
	}, {
		name:    "page size not a quantity",
		vmi:     newVMI(memory(v1.Memory{Hugepages: &v1.Hugepages{PageSize: "big"}})),
		wantErr: `spec.domain.memory.hugepages.pageSize: "big" is not a quantity`,
	}, {
		name:    "memory hotplug",
		vmi:     newVMI(memory(v1.Memory{MaxGuest: quantity("4Gi")})),
		wantErr: "spec.domain.memory.maxGuest: memory hotplug is not supported",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, Options{}, (*converter).convertMemory)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.wantMemory, dom.Memory); diff != "" {
				t.Errorf("<memory> (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBacking, dom.MemoryBacking); diff != "" {
				t.Errorf("<memoryBacking> (-want +got):\n%s", diff)
			}
		})
	}
}
