package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertCPU(t *testing.T) {
	withCPU := func(cpu v1.CPU) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.CPU = &cpu }
	}
	cpuRequest := func(field string, q string) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) {
			r := &vmi.Spec.Domain.Resources
			list := &r.Requests
			if field == "limits" {
				list = &r.Limits
			}
			if *list == nil {
				*list = corev1.ResourceList{}
			}
			(*list)[corev1.ResourceCPU] = resource.MustParse(q)
		}
	}
	topo := func(s, c, t int) *libvirtxml.DomainCPUTopology {
		return &libvirtxml.DomainCPUTopology{Sockets: s, Cores: c, Threads: t}
	}
	for _, tc := range []struct {
		name     string
		vmi      *v1.VirtualMachineInstance
		opts     Options
		wantVCPU *libvirtxml.DomainVCPU
		wantCPU  *libvirtxml.DomainCPU
		wantTune *libvirtxml.DomainCPUTune
		wantErr  string
	}{{
		name:     "one vCPU, host-model under KVM",
		vmi:      newVMI(),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-model", Topology: topo(1, 1, 1)},
	}, {
		name:     "sockets × cores × threads",
		vmi:      newVMI(withCPU(v1.CPU{Sockets: 2, Cores: 3, Threads: 2})),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 12},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-model", Topology: topo(2, 3, 2)},
	}, {
		name:     "vCPUs from the CPU limit, rounded up, as sockets",
		vmi:      newVMI(cpuRequest("requests", "1"), cpuRequest("limits", "2500m")),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 3},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-model", Topology: topo(3, 1, 1)},
	}, {
		name:     "vCPUs from the CPU request",
		vmi:      newVMI(cpuRequest("requests", "2")),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 2},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-model", Topology: topo(2, 1, 1)},
	}, {
		name:     "hotplug headroom with maxSockets",
		vmi:      newVMI(withCPU(v1.CPU{Sockets: 2, Cores: 2, MaxSockets: 4})),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 8, Current: 4},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-model", Topology: topo(4, 2, 1)},
	}, {
		name:    "maxSockets below sockets",
		vmi:     newVMI(withCPU(v1.CPU{Sockets: 4, MaxSockets: 2})),
		wantErr: "spec.domain.cpu.maxSockets: 2 is less than sockets (4)",
	}, {
		name:    "too many vCPUs",
		vmi:     newVMI(withCPU(v1.CPU{Sockets: 64, Cores: 64})),
		wantErr: "spec.domain.cpu: 64 sockets × 64 cores × 1 threads = 4096 vCPUs",
	}, {
		name:     "emulation turns host-model into maximum",
		vmi:      newVMI(withCPU(v1.CPU{Model: "host-model"})),
		opts:     Options{Emulation: true},
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "maximum", Topology: topo(1, 1, 1)},
	}, {
		name:     "emulation turns host-passthrough into maximum",
		vmi:      newVMI(withCPU(v1.CPU{Model: "host-passthrough"})),
		opts:     Options{Emulation: true},
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "maximum", Topology: topo(1, 1, 1)},
	}, {
		name:     "emulation keeps a named model",
		vmi:      newVMI(withCPU(v1.CPU{Model: "qemu64"})),
		opts:     Options{Emulation: true},
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "custom", Match: "exact", Model: &libvirtxml.DomainCPUModel{Value: "qemu64"}, Topology: topo(1, 1, 1)},
	}, {
		name:     "the node's default model",
		vmi:      newVMI(),
		opts:     Options{CPUModel: "Skylake-Client"},
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "custom", Match: "exact", Model: &libvirtxml.DomainCPUModel{Value: "Skylake-Client"}, Topology: topo(1, 1, 1)},
	}, {
		name:    "invalid model name",
		vmi:     newVMI(withCPU(v1.CPU{Model: "Skylake Client"})),
		wantErr: `spec.domain.cpu.model: invalid CPU model name "Skylake Client"`,
	}, {
		name:     "features with the default policy require",
		vmi:      newVMI(withCPU(v1.CPU{Model: "host-passthrough", Features: []v1.CPUFeature{{Name: "pcid"}, {Name: "vmx", Policy: "disable"}}})),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU: &libvirtxml.DomainCPU{Mode: "host-passthrough", Topology: topo(1, 1, 1), Features: []libvirtxml.DomainCPUFeature{
			{Name: "pcid", Policy: "require"}, {Name: "vmx", Policy: "disable"},
		}},
	}, {
		name:    "unknown feature policy",
		vmi:     newVMI(withCPU(v1.CPU{Features: []v1.CPUFeature{{Name: "pcid", Policy: "maybe"}}})),
		wantErr: `spec.domain.cpu.features[0].policy: unknown policy "maybe"`,
	}, {
		name:     "dedicated placement pins each vCPU and the emulator",
		vmi:      newVMI(withCPU(v1.CPU{Cores: 2, DedicatedCPUPlacement: true, IsolateEmulatorThread: true})),
		opts:     Options{CPUSet: []uint{4, 5, 6, 7}},
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 2},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-model", Topology: topo(1, 2, 1)},
		wantTune: &libvirtxml.DomainCPUTune{
			VCPUPin:     []libvirtxml.DomainCPUTuneVCPUPin{{VCPU: 0, CPUSet: "4"}, {VCPU: 1, CPUSet: "5"}},
			EmulatorPin: &libvirtxml.DomainCPUTuneEmulatorPin{CPUSet: "6"},
		},
	}, {
		name:    "dedicated placement without enough host CPUs",
		vmi:     newVMI(withCPU(v1.CPU{Cores: 2, DedicatedCPUPlacement: true, IsolateEmulatorThread: true})),
		opts:    Options{CPUSet: []uint{4, 5}},
		wantErr: "spec.domain.cpu.dedicatedCpuPlacement: needs 3 dedicated host CPUs and has 2 (4-5): the launcher pod gets CPUs of its own only from a kubelet with the static CPU manager policy, and only when its QoS class is Guaranteed",
	}, {
		name:    "emulator isolation without dedicated placement",
		vmi:     newVMI(withCPU(v1.CPU{IsolateEmulatorThread: true})),
		wantErr: "spec.domain.cpu.isolateEmulatorThread: needs dedicatedCpuPlacement",
	}, {
		name:     "arm64 KVM guests default to host-passthrough",
		vmi:      newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		wantVCPU: &libvirtxml.DomainVCPU{Placement: "static", Value: 1},
		wantCPU:  &libvirtxml.DomainCPU{Mode: "host-passthrough", Topology: topo(1, 1, 1)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, tc.opts, (*converter).convertCPU)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.wantVCPU, dom.VCPU); diff != "" {
				t.Errorf("<vcpu> (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCPU, dom.CPU); diff != "" {
				t.Errorf("<cpu> (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTune, dom.CPUTune); diff != "" {
				t.Errorf("<cputune> (-want +got):\n%s", diff)
			}
		})
	}
}
