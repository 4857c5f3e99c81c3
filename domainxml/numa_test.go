package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestConvertNUMA: guestMappingPassthrough gives a guest pinned to one
// host NUMA node one cell with every vCPU (maxSockets included) and its
// memory; it needs dedicated CPUs and huge pages, and
// vCPUs pinned across host nodes are reported as unsupported.
func TestConvertNUMA(t *testing.T) {
	numa := func(cpu v1.CPU, hugepages bool) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) {
			cpu.NUMA = &v1.NUMA{GuestMappingPassthrough: &v1.NUMAGuestMappingPassthrough{}}
			vmi.Spec.Domain.CPU = &cpu
			if hugepages {
				vmi.Spec.Domain.Memory = &v1.Memory{Hugepages: &v1.Hugepages{PageSize: "2Mi"}}
			}
		}
	}
	zero := uint(0)
	steps := []step{(*converter).convertCPU, (*converter).convertMemory, (*converter).convertNUMA}
	for _, tc := range []struct {
		name     string
		vmi      *v1.VirtualMachineInstance
		opts     Options
		wantCell []libvirtxml.DomainCell
		wantErr  string
	}{{
		name:     "one host node: one cell of every vCPU and all the memory, bound to it",
		vmi:      newVMI(numa(v1.CPU{Sockets: 1, Cores: 2, MaxSockets: 2, DedicatedCPUPlacement: true}, true)),
		opts:     Options{CPUSet: []uint{2, 3, 4, 5}, HostNUMANodes: map[uint]uint{0: 0, 1: 0, 2: 1, 3: 1, 4: 1, 5: 1}},
		wantCell: []libvirtxml.DomainCell{{ID: &zero, CPUs: "0-3", Memory: 131072, Unit: "KiB"}},
	}, {
		name:     "no NUMA information: node 0",
		vmi:      newVMI(numa(v1.CPU{DedicatedCPUPlacement: true}, true)),
		opts:     Options{CPUSet: []uint{5}},
		wantCell: []libvirtxml.DomainCell{{ID: &zero, CPUs: "0", Memory: 131072, Unit: "KiB"}},
	}, {
		name:    "vCPUs on two host nodes",
		vmi:     newVMI(numa(v1.CPU{Cores: 2, DedicatedCPUPlacement: true}, true)),
		opts:    Options{CPUSet: []uint{1, 2}, HostNUMANodes: map[uint]uint{1: 0, 2: 1}},
		wantErr: "spec.domain.cpu.numa.guestMappingPassthrough: vmkit cannot spread a guest over host NUMA nodes [0 1]",
	}, {
		name:    "without dedicated CPUs",
		vmi:     newVMI(numa(v1.CPU{Cores: 2}, true)),
		wantErr: "spec.domain.cpu.numa.guestMappingPassthrough: needs spec.domain.cpu.dedicatedCpuPlacement",
	}, {
		name:    "without huge pages",
		vmi:     newVMI(numa(v1.CPU{DedicatedCPUPlacement: true}, false)),
		opts:    Options{CPUSet: []uint{1}},
		wantErr: "spec.domain.cpu.numa.guestMappingPassthrough: needs spec.domain.memory.hugepages",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, steps...)
			if !checkErr(t, err, tc.wantErr) || tc.wantErr != "" {
				return
			}
			if dom.CPU == nil || dom.CPU.Numa == nil {
				t.Fatalf("no <numa> in <cpu>: %+v", dom.CPU)
			}
			if diff := cmp.Diff(tc.wantCell, dom.CPU.Numa.Cell); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
			if dom.NUMATune != nil {
				t.Errorf("numatune %+v: one host node needs no binding", dom.NUMATune)
			}
		})
	}
}
