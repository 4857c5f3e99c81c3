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
		name:       "maxGuest equal to the guest memory: nothing to plug",
		vmi:        newVMI(memory(v1.Memory{Guest: quantity("1Gi"), MaxGuest: quantity("1Gi")})),
		wantMemory: &libvirtxml.DomainMemory{Value: 1 << 20, Unit: "KiB"},
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

func TestConvertMemoryHotplug(t *testing.T) {
	hotplug := func(guest, maxGuest, atBoot string) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: quantity(guest), MaxGuest: quantity(maxGuest)}
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 1, MaxSockets: 2}
			if atBoot != "" {
				vmi.Status.Memory = &v1.MemoryStatus{GuestAtBoot: quantity(atBoot)}
			}
		}
	}
	cell := uint(0)
	for _, tc := range []struct {
		name      string
		vmi       *v1.VirtualMachineInstance
		wantBoot  uint // KiB
		wantMax   uint
		wantSize  uint
		wantReq   uint
		wantBlock uint
		wantErr   string
	}{{
		name:     "first boot: nothing requested yet",
		vmi:      newVMI(hotplug("1Gi", "4Gi", "")),
		wantBoot: 1 << 20, wantMax: 4 << 20, wantSize: 3 << 20, wantReq: 0, wantBlock: 2048,
	}, {
		name:     "restarted launcher of a grown guest: boots with its first memory, requests the rest",
		vmi:      newVMI(hotplug("2Gi", "4Gi", "1Gi")),
		wantBoot: 1 << 20, wantMax: 4 << 20, wantSize: 3 << 20, wantReq: 1 << 20, wantBlock: 2048,
	}, {
		name: "1Gi huge pages plug 1Gi blocks",
		vmi: newVMI(hotplug("2Gi", "4Gi", ""), func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory.Hugepages = &v1.Hugepages{PageSize: "1Gi"}
		}),
		wantBoot: 2 << 20, wantMax: 4 << 20, wantSize: 2 << 20, wantReq: 0, wantBlock: 1 << 20,
	}, {
		name:    "guest above maxGuest",
		vmi:     newVMI(hotplug("5Gi", "4Gi", "1Gi")),
		wantErr: "spec.domain.memory.guest: 5Gi is more than spec.domain.memory.maxGuest (4Gi)",
	}, {
		name:    "guest below its boot memory",
		vmi:     newVMI(hotplug("1Gi", "4Gi", "2Gi")),
		wantErr: "spec.domain.memory.guest: 1Gi is less than the 2Gi the guest booted with",
	}, {
		name:    "guest not 2Mi aligned",
		vmi:     newVMI(hotplug("1025Mi", "4Gi", "")),
		wantErr: "spec.domain.memory.guest: 1025Mi is not 2Mi aligned",
	}, {
		name:    "maxGuest not 2Mi aligned",
		vmi:     newVMI(hotplug("1Gi", "4097Mi", "")),
		wantErr: "spec.domain.memory.maxGuest: 4097Mi is not 2Mi aligned",
	}, {
		name:    "less than 1Gi",
		vmi:     newVMI(hotplug("512Mi", "4Gi", "")),
		wantErr: "spec.domain.memory.maxGuest: memory hotplug needs at least 1Gi of guest memory (spec.domain.memory.guest has 512Mi)",
	}, {
		name: "with guest NUMA passthrough",
		vmi: newVMI(hotplug("1Gi", "4Gi", ""), func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU.NUMA = &v1.NUMA{GuestMappingPassthrough: &v1.NUMAGuestMappingPassthrough{}}
		}),
		wantErr: "spec.domain.memory.maxGuest: memory hotplug is not compatible with spec.domain.cpu.numa.guestMappingPassthrough",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, Options{}, (*converter).convertCPU, (*converter).convertMemory)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(&libvirtxml.DomainMemory{Value: tc.wantBoot, Unit: "KiB"}, dom.Memory); diff != "" {
				t.Errorf("<memory> (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&libvirtxml.DomainMaxMemory{Value: tc.wantMax, Unit: "KiB", Slots: 1}, dom.MaximumMemory); diff != "" {
				t.Errorf("<maxMemory> (-want +got):\n%s", diff)
			}
			wantNUMA := &libvirtxml.DomainNuma{Cell: []libvirtxml.DomainCell{{ID: &cell, CPUs: "0-1", Memory: tc.wantBoot, Unit: "KiB"}}}
			if diff := cmp.Diff(wantNUMA, dom.CPU.Numa); diff != "" {
				t.Errorf("<numa> (-want +got):\n%s", diff)
			}
			want := []libvirtxml.DomainMemorydev{{
				Model: "virtio-mem",
				Target: &libvirtxml.DomainMemorydevTarget{
					Size:      &libvirtxml.DomainMemorydevTargetSize{Value: tc.wantSize, Unit: "KiB"},
					Node:      &libvirtxml.DomainMemorydevTargetNode{Value: 0},
					Block:     &libvirtxml.DomainMemorydevTargetBlock{Value: tc.wantBlock, Unit: "KiB"},
					Requested: &libvirtxml.DomainMemorydevTargetRequested{Value: tc.wantReq, Unit: "KiB"},
				},
			}}
			if diff := cmp.Diff(want, dom.Devices.Memorydevs); diff != "" {
				t.Errorf("virtio-mem (-want +got):\n%s", diff)
			}
		})
	}
}
