package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertHyperv(t *testing.T) {
	on := &v1.FeatureState{}
	off := &v1.FeatureState{Enabled: ptr(false)}
	stateOn := &libvirtxml.DomainFeatureState{State: "on"}
	stateOff := &libvirtxml.DomainFeatureState{State: "off"}
	hyperv := func(h v1.FeatureHyperv) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Features = &v1.Features{Hyperv: &h} }
	}
	emulation := Options{Emulation: true}
	for _, tc := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		opts    Options
		want    *libvirtxml.DomainFeatureHyperV
		wantErr string
	}{{
		name: "every enlightenment, as KubeVirt's converter",
		vmi: newVMI(hyperv(v1.FeatureHyperv{
			Relaxed: on, VAPIC: on, Spinlocks: &v1.FeatureSpinlocks{Retries: ptr(uint32(8191))}, VPIndex: on, Runtime: on,
			SyNIC: on, SyNICTimer: &v1.SyNICTimer{Direct: on}, Reset: on, VendorID: &v1.FeatureVendorID{VendorID: "KVMKVMKVM"},
			Frequencies: on, Reenlightenment: on, TLBFlush: &v1.TLBFlush{Direct: on, Extended: off}, IPI: on,
		})),
		want: &libvirtxml.DomainFeatureHyperV{
			Relaxed: stateOn, VAPIC: stateOn, Spinlocks: &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: *stateOn, Retries: 8191},
			VPIndex: stateOn, Runtime: stateOn, Synic: stateOn, STimer: &libvirtxml.DomainFeatureHyperVSTimer{DomainFeatureState: *stateOn, Direct: stateOn},
			Reset: stateOn, VendorId: &libvirtxml.DomainFeatureHyperVVendorId{DomainFeatureState: *stateOn, Value: "KVMKVMKVM"},
			Frequencies: stateOn, ReEnlightenment: stateOn, TLBFlush: &libvirtxml.DomainFeatureHyperVTLBFlush{DomainFeatureState: *stateOn, Direct: stateOn, Extended: stateOff},
			IPI: stateOn,
		},
	}, {
		name: "disabled enlightenments are off, unset ones absent",
		vmi:  newVMI(hyperv(v1.FeatureHyperv{Relaxed: off, Spinlocks: &v1.FeatureSpinlocks{FeatureState: *off}, VendorID: &v1.FeatureVendorID{FeatureState: *off}})),
		want: &libvirtxml.DomainFeatureHyperV{Relaxed: stateOff, Spinlocks: &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: *stateOff},
			VendorId: &libvirtxml.DomainFeatureHyperVVendorId{DomainFeatureState: *stateOff}},
	}, {
		name: "spinlocks without a count get 4096",
		vmi:  newVMI(hyperv(v1.FeatureHyperv{Spinlocks: &v1.FeatureSpinlocks{}})),
		want: &libvirtxml.DomainFeatureHyperV{Spinlocks: &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: *stateOn, Retries: 4096}},
	}, {
		name:    "too few spinlock retries",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{Spinlocks: &v1.FeatureSpinlocks{Retries: ptr(uint32(100))}})),
		wantErr: "spec.domain.features.hyperv.spinlocks.spinlocks: 100 retries, want at least 4096",
	}, {
		name:    "vendor id longer than 12",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{VendorID: &v1.FeatureVendorID{VendorID: "thirteenchars"}})),
		wantErr: "spec.domain.features.hyperv.vendorid.vendorid",
	}, {
		name:    "vendor id missing",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{VendorID: &v1.FeatureVendorID{}})),
		wantErr: "spec.domain.features.hyperv.vendorid.vendorid",
	}, {
		name: "synictimer turns on synic and vpindex, as KubeVirt's mutator",
		vmi:  newVMI(hyperv(v1.FeatureHyperv{SyNICTimer: &v1.SyNICTimer{}})),
		want: &libvirtxml.DomainFeatureHyperV{VPIndex: stateOn, Synic: stateOn, STimer: &libvirtxml.DomainFeatureHyperVSTimer{DomainFeatureState: *stateOn}},
	}, {
		name:    "synic with vpindex disabled",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{SyNIC: on, VPIndex: off})),
		wantErr: "spec.domain.features.hyperv.synic: requires spec.domain.features.hyperv.vpindex, which is disabled",
	}, {
		name:    "synictimer with synic disabled",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{SyNICTimer: &v1.SyNICTimer{}, SyNIC: off})),
		wantErr: "spec.domain.features.hyperv.synictimer: requires spec.domain.features.hyperv.synic, which is disabled",
	}, {
		name:    "ipi with vpindex disabled",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{IPI: on, VPIndex: off})),
		wantErr: "spec.domain.features.hyperv.ipi: requires spec.domain.features.hyperv.vpindex",
	}, {
		name: "a disabled synictimer needs nothing",
		vmi:  newVMI(hyperv(v1.FeatureHyperv{SyNICTimer: &v1.SyNICTimer{FeatureState: *off}, SyNIC: off})),
		want: &libvirtxml.DomainFeatureHyperV{Synic: stateOff, STimer: &libvirtxml.DomainFeatureHyperVSTimer{DomainFeatureState: *stateOff}},
	}, {
		name: "under emulation what TCG starts with",
		vmi:  newVMI(hyperv(v1.FeatureHyperv{Relaxed: on, VAPIC: on, Spinlocks: &v1.FeatureSpinlocks{Retries: ptr(uint32(8191))}, Runtime: on, Reset: on, Frequencies: on, Reenlightenment: on})),
		opts: emulation,
		want: &libvirtxml.DomainFeatureHyperV{Relaxed: stateOn, VAPIC: stateOn, Spinlocks: &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: *stateOn, Retries: 8191},
			Runtime: stateOn, Reset: stateOn, Frequencies: stateOn, ReEnlightenment: stateOn},
	}, {
		name:    "vpindex under emulation",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{VPIndex: on})),
		opts:    emulation,
		wantErr: "spec.domain.features.hyperv.vpindex: needs the Hyper-V VP index, which QEMU cannot give a guest under TCG emulation",
	}, {
		name:    "synic under emulation",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{SyNIC: on})),
		opts:    emulation,
		wantErr: "spec.domain.features.hyperv.vpindex: needs the Hyper-V VP index",
	}, {
		name: "vpindex off under emulation",
		vmi:  newVMI(hyperv(v1.FeatureHyperv{VPIndex: off})),
		opts: emulation,
		want: &libvirtxml.DomainFeatureHyperV{VPIndex: stateOff},
	}, {
		name:    "evmcs under emulation",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{EVMCS: on})),
		opts:    emulation,
		wantErr: "spec.domain.features.hyperv.evmcs: enlightened VMCS needs the host's VMX (KVM)",
	}, {
		name:    "evmcs without the vmx CPU feature",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{EVMCS: on})),
		wantErr: "spec.domain.cpu.features: the vmx CPU feature with policy require is needed when evmcs is set",
	}, {
		name: "evmcs with vmx turns on vapic",
		vmi: newVMI(hyperv(v1.FeatureHyperv{EVMCS: on}), func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Features: []v1.CPUFeature{{Name: "vmx"}}}
		}),
		want: &libvirtxml.DomainFeatureHyperV{VAPIC: stateOn, EVMCS: stateOn},
	}, {
		name: "hyperv and hypervPassthrough",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Features = &v1.Features{Hyperv: &v1.FeatureHyperv{}, HypervPassthrough: &v1.HyperVPassthrough{Enabled: ptr(true)}}
		}),
		wantErr: "spec.domain.features.hyperv: cannot be set together with spec.domain.features.hypervPassthrough",
	}, {
		name: "hypervPassthrough",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Features = &v1.Features{HypervPassthrough: &v1.HyperVPassthrough{Enabled: ptr(true)}}
		}),
		opts: emulation,
		want: &libvirtxml.DomainFeatureHyperV{Mode: "passthrough"},
	}, {
		name: "hypervPassthrough unset or off",
		vmi: newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Features = &v1.Features{HypervPassthrough: &v1.HyperVPassthrough{}}
		}),
	}, {
		name:    "hyperv on arm64",
		vmi:     newVMI(hyperv(v1.FeatureHyperv{Relaxed: on}), func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		wantErr: "spec.domain.features.hyperv: not supported on arm64",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.vmi.DeepCopy()
			c, err := newConverter(tc.vmi, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			fl := &libvirtxml.DomainFeatureList{}
			err = c.convertHyperv(fl)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, fl.HyperV); diff != "" {
				t.Errorf("<hyperv> (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.vmi); diff != "" {
				t.Errorf("the VMI was changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestHypervTimer: clock.timer.hyperv is libvirt's hypervclock timer,
// present unless turned off, as KubeVirt's converter writes it.
func TestHypervTimer(t *testing.T) {
	for _, tc := range []struct {
		timer *v1.HypervTimer
		want  string
	}{{&v1.HypervTimer{}, "yes"}, {&v1.HypervTimer{Enabled: ptr(false)}, "no"}} {
		vmi := newVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Clock = &v1.Clock{Timer: &v1.Timer{Hyperv: tc.timer}}
		})
		dom, err := Convert(vmi, Options{Emulation: true})
		if err != nil {
			t.Fatal(err)
		}
		want := []libvirtxml.DomainTimer{{Name: "hypervclock", Present: tc.want}}
		if diff := cmp.Diff(want, dom.Clock.Timer); diff != "" {
			t.Errorf("timers (-want +got):\n%s", diff)
		}
	}
	vmi := newVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Architecture = "arm64"
		vmi.Spec.Domain.Clock = &v1.Clock{Timer: &v1.Timer{Hyperv: &v1.HypervTimer{}}}
	})
	c, err := newConverter(vmi, &Options{Emulation: true})
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, c.convertClock(), "spec.domain.clock.timer.hyperv: not supported on arm64")
}
