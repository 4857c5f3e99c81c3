// Package hyperv converts a VMI's Hyper-V enlightenments
// (spec.domain.features.hyperv and hypervPassthrough) to libvirt's
// <hyperv> feature, with KubeVirt's dependencies between them.
package hyperv

import (
	"fmt"

	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// minSpinlockRetries is the least spinlocks.spinlocks KubeVirt accepts (and
// the Hyper-V specification's default).
const minSpinlockRetries = 4096

// hypervDependency is a Hyper-V enlightenment another one needs (KubeVirt's
// virt-api: "'a' requires 'b', which was disabled").
type hypervDependency struct {
	name, requires string
	state, needed  **v1.FeatureState
}

// Convert returns the <hyperv> of f (spec.domain.features): from hyperv (each
// enlightenment on or off as its enabled says, on when unset, as KubeVirt's
// converter) or hypervPassthrough (mode passthrough: every enlightenment
// the hypervisor has). As KubeVirt's VMI mutator does, an enlightenment
// another one needs (vpindex for synic, ipi and tlbflush; synic for
// synictimer; vapic for evmcs) is turned on when left unset, and refused
// when turned off. Under Options.Emulation (QEMU's TCG) vpindex, and so
// synic, synictimer, tlbflush and ipi, are errors naming the field: QEMU
// refuses to start a TCG guest with them. evmcs (enlightened VMCS, for
// nested Hyper-V) needs the host's VMX: an error under emulation, and on
// KVM it needs the vmx CPU feature required in cpu (spec.domain.cpu), as
// KubeVirt checks. arch is the guest's architecture (GOARCH); emulation
// is Options.Emulation. It returns nil when f asks for no <hyperv>; its
// errors are *FieldError.
func Convert(f *v1.Features, cpu *v1.CPU, arch string, emulation bool) (*libvirtxml.DomainFeatureHyperV, error) {
	const field = "spec.domain.features.hyperv"
	if f.Hyperv != nil && f.HypervPassthrough != nil {
		return nil, fieldErrorf(field, "cannot be set together with spec.domain.features.hypervPassthrough")
	}
	if f.HypervPassthrough != nil {
		if !enabled(f.HypervPassthrough.Enabled, false) {
			return nil, nil
		}
		if arch != "amd64" {
			return nil, fieldErrorf("spec.domain.features.hypervPassthrough", "not supported on %s", arch)
		}
		return &libvirtxml.DomainFeatureHyperV{Mode: "passthrough"}, nil
	}
	if f.Hyperv == nil {
		return nil, nil
	}
	if arch != "amd64" {
		return nil, fieldErrorf(field, "not supported on %s", arch)
	}
	h := f.Hyperv.DeepCopy() // dependencies are filled in on the copy
	var synicTimer, tlbFlush *v1.FeatureState
	if h.SyNICTimer != nil {
		synicTimer = &h.SyNICTimer.FeatureState
	}
	if h.TLBFlush != nil {
		tlbFlush = &h.TLBFlush.FeatureState
	}
	// synictimer comes before synic, so that a synic it turns on gets
	// its vpindex (KubeVirt's order).
	for _, d := range []hypervDependency{
		{"evmcs", "vapic", &h.EVMCS, &h.VAPIC},
		{"ipi", "vpindex", &h.IPI, &h.VPIndex},
		{"tlbflush", "vpindex", &tlbFlush, &h.VPIndex},
		{"synictimer", "synic", &synicTimer, &h.SyNIC},
		{"synic", "vpindex", &h.SyNIC, &h.VPIndex},
	} {
		if *d.state == nil || !enabled((*d.state).Enabled, true) {
			continue
		}
		switch need := *d.needed; {
		case need == nil:
			*d.needed = &v1.FeatureState{Enabled: ptrTo(true)}
		case !enabled(need.Enabled, true):
			return nil, fieldErrorf(field+"."+d.name, "requires %s.%s, which is disabled", field, d.requires)
		}
	}

	hv := &libvirtxml.DomainFeatureHyperV{
		Relaxed:         featureState(h.Relaxed),
		VAPIC:           featureState(h.VAPIC),
		VPIndex:         featureState(h.VPIndex),
		Runtime:         featureState(h.Runtime),
		Synic:           featureState(h.SyNIC),
		Reset:           featureState(h.Reset),
		Frequencies:     featureState(h.Frequencies),
		ReEnlightenment: featureState(h.Reenlightenment),
		IPI:             featureState(h.IPI),
		EVMCS:           featureState(h.EVMCS),
	}
	if s := h.Spinlocks; s != nil {
		hv.Spinlocks = &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: libvirtxml.DomainFeatureState{State: onOff(enabled(s.Enabled, true))}}
		if s.Retries != nil {
			if *s.Retries < minSpinlockRetries {
				return nil, fieldErrorf(field+".spinlocks.spinlocks", "%d retries, want at least %d", *s.Retries, minSpinlockRetries)
			}
			hv.Spinlocks.Retries = uint(*s.Retries)
		} else if hv.Spinlocks.State == "on" {
			hv.Spinlocks.Retries = minSpinlockRetries // libvirt wants a count with state on
		}
	}
	if v := h.VendorID; v != nil {
		on := enabled(v.Enabled, true)
		if on && !isVendorID(v.VendorID) {
			return nil, fieldErrorf(field+".vendorid.vendorid", "%q is not a vendor id of 1 to 12 letters and digits", v.VendorID)
		}
		hv.VendorId = &libvirtxml.DomainFeatureHyperVVendorId{DomainFeatureState: libvirtxml.DomainFeatureState{State: onOff(on)}}
		if on {
			hv.VendorId.Value = v.VendorID
		}
	}
	if t := h.SyNICTimer; t != nil {
		hv.STimer = &libvirtxml.DomainFeatureHyperVSTimer{DomainFeatureState: libvirtxml.DomainFeatureState{State: onOff(enabled(t.Enabled, true))}, Direct: featureState(t.Direct)}
	}
	if t := h.TLBFlush; t != nil {
		hv.TLBFlush = &libvirtxml.DomainFeatureHyperVTLBFlush{DomainFeatureState: libvirtxml.DomainFeatureState{State: onOff(enabled(t.Enabled, true))},
			Direct: featureState(t.Direct), Extended: featureState(t.Extended)}
	}
	if emulation {
		// QEMU 7.2 under TCG refuses to start with hv-vpindex ("kernel
		// doesn't allow setting HyperV VP_INDEX"); what needs it goes too.
		for _, e := range []struct {
			name string
			on   bool
		}{
			{"vpindex", isOn(hv.VPIndex)}, {"synic", isOn(hv.Synic)}, {"synictimer", hv.STimer != nil && hv.STimer.State == "on"},
			{"tlbflush", hv.TLBFlush != nil && hv.TLBFlush.State == "on"}, {"ipi", isOn(hv.IPI)},
		} {
			if e.on {
				return nil, fieldErrorf(field+"."+e.name, "needs the Hyper-V VP index, which QEMU cannot give a guest under TCG emulation (only under KVM)")
			}
		}
	}
	if hv.EVMCS != nil && hv.EVMCS.State == "on" {
		if emulation {
			return nil, fieldErrorf(field+".evmcs", "enlightened VMCS needs the host's VMX (KVM); QEMU's TCG emulation has none")
		}
		if !requiresCPUFeature(cpu, "vmx") {
			return nil, fieldErrorf("spec.domain.cpu.features", "the vmx CPU feature with policy require is needed when evmcs is set")
		}
	}
	return hv, nil
}

// requiresCPUFeature reports whether cpu.features has name with policy
// require (the default).
func requiresCPUFeature(cpu *v1.CPU, name string) bool {
	if cpu == nil {
		return false
	}
	for _, f := range cpu.Features {
		if f.Name == name && (f.Policy == "" || f.Policy == "require") {
			return true
		}
	}
	return false
}

// featureState is a Hyper-V enlightenment's state: on unless enabled is
// false; nil when unset.
func featureState(s *v1.FeatureState) *libvirtxml.DomainFeatureState {
	if s == nil {
		return nil
	}
	return &libvirtxml.DomainFeatureState{State: onOff(enabled(s.Enabled, true))}
}

func isOn(s *libvirtxml.DomainFeatureState) bool { return s != nil && s.State == "on" }

func ptrTo[T any](v T) *T { return &v }

// FieldError says which field cannot be converted and why.
type FieldError struct {
	// Field is the path of the offending field.
	Field string
	// Message says what is wrong with it.
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// enabled reports whether an optional on/off switch is on, given its default.
func enabled(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// isVendorID reports whether s is 1 to 12 letters and digits.
func isVendorID(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}
