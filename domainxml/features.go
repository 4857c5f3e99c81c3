package domainxml

import (
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// TCGTranslationCacheMiB is the size of QEMU's translation cache for a
// guest under emulation (libvirt's <tcg><tb-cache>): bounded, so that the
// launcher's memory overhead covers it.
const TCGTranslationCacheMiB = 128

// convertFeatures sets the platform features: ACPI (on unless disabled; on
// arm64 only with EFI, which arm64 ACPI needs), APIC with paravirtual EOI,
// SMM (forced on for secure boot), the KVM signature, paravirtual
// spinlocks and the Hyper-V enlightenments (convertHyperv). The last two only mean something under KVM: under emulation
// there is no KVM signature to hide and no paravirtual spinlock to turn on,
// so they are left out.
func (c *converter) convertFeatures() error {
	f := c.spec.Features
	fl := &libvirtxml.DomainFeatureList{}
	c.dom.Features = fl

	acpiDefault := !c.opts.arch.firmwareNeedsEFI || c.efi
	acpi := acpiDefault
	if f != nil && f.ACPI.Enabled != nil {
		acpi = *f.ACPI.Enabled
	}
	if acpi && !acpiDefault {
		return fieldErrorf("spec.domain.features.acpi", "ACPI on %s needs EFI", c.opts.arch.name)
	}
	if acpi {
		fl.ACPI = &libvirtxml.DomainFeature{}
	}

	smm := c.secureBoot
	if f != nil && f.SMM != nil {
		on := enabled(f.SMM.Enabled, true)
		if !on && c.secureBoot {
			return fieldErrorf("spec.domain.features.smm", "secure boot needs SMM")
		}
		if on && !c.opts.arch.hasSMM {
			return fieldErrorf("spec.domain.features.smm", "not supported on %s", c.opts.arch.name)
		}
		smm = on
		if !on {
			fl.SMM = &libvirtxml.DomainFeatureSMM{State: "off"}
		}
	}
	if smm {
		fl.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
	}
	if c.opts.Emulation {
		// QEMU's default translation cache under TCG is 1 GiB, which it
		// fills as the guest runs new code: a booting Debian guest's QEMU
		// outgrew its pod's memory limit by that (the launcher soak, #41).
		fl.TCG = &libvirtxml.DomainFeatureTCG{TBCache: &libvirtxml.DomainFeatureTCGTBCache{Unit: "MiB", Size: TCGTranslationCacheMiB}}
	}
	if f == nil {
		return nil
	}
	if f.APIC != nil && enabled(f.APIC.Enabled, true) {
		if c.opts.arch.name != "amd64" {
			return fieldErrorf("spec.domain.features.apic", "not supported on %s", c.opts.arch.name)
		}
		fl.APIC = &libvirtxml.DomainFeatureAPIC{}
		if f.APIC.EndOfInterrupt {
			fl.APIC.EOI = "on"
		}
	}
	if f.KVM != nil && f.KVM.Hidden && !c.opts.Emulation {
		fl.KVM = &libvirtxml.DomainFeatureKVM{Hidden: &libvirtxml.DomainFeatureState{State: "on"}}
	}
	if p := f.Pvspinlock; p != nil {
		on := enabled(p.Enabled, true)
		if !on || !c.opts.Emulation {
			fl.PVSpinlock = &libvirtxml.DomainFeatureState{State: onOff(on)}
		}
	}
	return c.convertHyperv(fl)
}

// convertClock sets the guest clock: UTC (plus an offset) or a time zone,
// and the timers spec configures.
func (c *converter) convertClock() error {
	clk := &libvirtxml.DomainClock{Offset: "utc"}
	c.dom.Clock = clk
	spec := c.spec.Clock
	if spec == nil {
		return nil
	}
	if spec.UTC != nil && spec.Timezone != nil {
		return fieldErrorf("spec.domain.clock", "utc and timezone are mutually exclusive")
	}
	if spec.UTC != nil && spec.UTC.OffsetSeconds != nil {
		clk.Adjustment = strconv.Itoa(*spec.UTC.OffsetSeconds)
	}
	if tz := spec.Timezone; tz != nil {
		if !isToken(string(*tz), 64, "/_+-") {
			return fieldErrorf("spec.domain.clock.timezone", "invalid time zone name %q", string(*tz))
		}
		clk.Offset, clk.TimeZone = "timezone", string(*tz)
	}
	t := spec.Timer
	if t == nil {
		return nil
	}
	x86 := c.opts.arch.name == "amd64"
	if t.HPET != nil {
		if !x86 {
			return fieldErrorf("spec.domain.clock.timer.hpet", "not supported on %s", c.opts.arch.name)
		}
		if err := checkTickPolicy("spec.domain.clock.timer.hpet.tickPolicy", t.HPET.TickPolicy, "delay, catchup, merge or discard"); err != nil {
			return err
		}
		clk.Timer = append(clk.Timer, libvirtxml.DomainTimer{Name: "hpet", TickPolicy: t.HPET.TickPolicy, Present: yesNo(enabled(t.HPET.Enabled, true))})
	}
	if t.KVM != nil {
		clk.Timer = append(clk.Timer, libvirtxml.DomainTimer{Name: "kvmclock", Present: yesNo(enabled(t.KVM.Enabled, true))})
	}
	if t.PIT != nil {
		if !x86 {
			return fieldErrorf("spec.domain.clock.timer.pit", "not supported on %s", c.opts.arch.name)
		}
		if err := checkTickPolicy("spec.domain.clock.timer.pit.tickPolicy", t.PIT.TickPolicy, "delay, catchup or discard"); err != nil {
			return err
		}
		clk.Timer = append(clk.Timer, libvirtxml.DomainTimer{Name: "pit", TickPolicy: t.PIT.TickPolicy, Present: yesNo(enabled(t.PIT.Enabled, true))})
	}
	if t.RTC != nil {
		if !x86 {
			return fieldErrorf("spec.domain.clock.timer.rtc", "not supported on %s", c.opts.arch.name)
		}
		if err := checkTickPolicy("spec.domain.clock.timer.rtc.tickPolicy", t.RTC.TickPolicy, "delay or catchup"); err != nil {
			return err
		}
		switch t.RTC.Track {
		case "", "guest", "wall":
		default:
			return fieldErrorf("spec.domain.clock.timer.rtc.track", "unknown track %q (want guest or wall)", t.RTC.Track)
		}
		clk.Timer = append(clk.Timer, libvirtxml.DomainTimer{Name: "rtc", Track: t.RTC.Track, TickPolicy: t.RTC.TickPolicy, Present: yesNo(enabled(t.RTC.Enabled, true))})
	}
	if t.Hyperv != nil {
		if !x86 {
			return fieldErrorf("spec.domain.clock.timer.hyperv", "not supported on %s", c.opts.arch.name)
		}
		clk.Timer = append(clk.Timer, hypervTimer(t.Hyperv))
	}
	return nil
}

// checkTickPolicy accepts an empty policy or one of those listed in allowed,
// an English list such as "delay, catchup or discard".
func checkTickPolicy(field, p, allowed string) error {
	if p == "" {
		return nil
	}
	for _, w := range strings.FieldsFunc(allowed, func(r rune) bool { return r == ',' || r == ' ' }) {
		if w == p && w != "or" {
			return nil
		}
	}
	return fieldErrorf(field, "unknown tick policy %q (want %s)", p, allowed)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
