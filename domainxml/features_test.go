package domainxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertFeatures(t *testing.T) {
	features := func(f v1.Features) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Features = &f }
	}
	secureBoot := func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{SecureBoot: ptr(true)}}}
	}
	acpi := &libvirtxml.DomainFeature{}
	for _, tc := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		opts    Options
		want    *libvirtxml.DomainFeatureList
		wantErr string
	}{{
		name: "ACPI by default",
		vmi:  newVMI(),
		want: &libvirtxml.DomainFeatureList{ACPI: acpi},
	}, {
		name: "ACPI off",
		vmi:  newVMI(features(v1.Features{ACPI: v1.FeatureState{Enabled: ptr(false)}})),
		want: &libvirtxml.DomainFeatureList{},
	}, {
		name: "APIC with paravirtual EOI, SMM, KVM hidden, pvspinlock",
		vmi: newVMI(features(v1.Features{
			APIC: &v1.FeatureAPIC{EndOfInterrupt: true}, SMM: &v1.FeatureState{},
			KVM: &v1.FeatureKVM{Hidden: true}, Pvspinlock: &v1.FeatureState{},
		})),
		want: &libvirtxml.DomainFeatureList{
			ACPI: acpi, APIC: &libvirtxml.DomainFeatureAPIC{EOI: "on"}, SMM: &libvirtxml.DomainFeatureSMM{State: "on"},
			KVM: &libvirtxml.DomainFeatureKVM{Hidden: &libvirtxml.DomainFeatureState{State: "on"}}, PVSpinlock: &libvirtxml.DomainFeatureState{State: "on"},
		},
	}, {
		name: "emulation drops the KVM-only features it cannot honour, and bounds TCG's translation cache",
		vmi: newVMI(features(v1.Features{
			KVM: &v1.FeatureKVM{Hidden: true}, Pvspinlock: &v1.FeatureState{},
		})),
		opts: Options{Emulation: true},
		want: &libvirtxml.DomainFeatureList{ACPI: acpi, TCG: tcg128},
	}, {
		name: "pvspinlock off is kept under emulation",
		vmi:  newVMI(features(v1.Features{Pvspinlock: &v1.FeatureState{Enabled: ptr(false)}})),
		opts: Options{Emulation: true},
		want: &libvirtxml.DomainFeatureList{ACPI: acpi, TCG: tcg128, PVSpinlock: &libvirtxml.DomainFeatureState{State: "off"}},
	}, {
		name: "secure boot turns SMM on",
		vmi:  newVMI(secureBoot),
		want: &libvirtxml.DomainFeatureList{ACPI: acpi, SMM: &libvirtxml.DomainFeatureSMM{State: "on"}},
	}, {
		name:    "secure boot with SMM off",
		vmi:     newVMI(secureBoot, features(v1.Features{SMM: &v1.FeatureState{Enabled: ptr(false)}})),
		wantErr: "spec.domain.features.smm: secure boot needs SMM",
	}, {
		name: "SMM off",
		vmi:  newVMI(features(v1.Features{SMM: &v1.FeatureState{Enabled: ptr(false)}})),
		want: &libvirtxml.DomainFeatureList{ACPI: acpi, SMM: &libvirtxml.DomainFeatureSMM{State: "off"}},
	}, {
		name:    "APIC on arm64",
		vmi:     newVMI(features(v1.Features{APIC: &v1.FeatureAPIC{}}), func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		wantErr: "spec.domain.features.apic: not supported on arm64",
	}, {
		name: "arm64 without EFI has no ACPI",
		vmi:  newVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		want: &libvirtxml.DomainFeatureList{},
	}, {
		name:    "arm64 ACPI needs EFI",
		vmi:     newVMI(features(v1.Features{ACPI: v1.FeatureState{Enabled: ptr(true)}}), func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		wantErr: "spec.domain.features.acpi: ACPI on arm64 needs EFI",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// convertOS decides EFI and secure boot, which features depend on.
			c, err := newConverter(tc.vmi, &tc.opts)
			if err == nil {
				if fw := tc.vmi.Spec.Domain.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil {
					c.dom.OS = &libvirtxml.DomainOS{} // made by convertOS, filled in by convertEFI
					err = c.convertEFI("q35", enabled(fw.Bootloader.EFI.SecureBoot, false))
				}
			}
			if err == nil {
				err = c.convertFeatures()
			}
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, c.dom.Features); diff != "" {
				t.Errorf("<features> (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertClock(t *testing.T) {
	clock := func(c v1.Clock) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Domain.Clock = &c }
	}
	tz := v1.ClockOffsetTimezone("Europe/Berlin")
	badTZ := v1.ClockOffsetTimezone("Europe/Berlin<script>")
	for _, tc := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		want    *libvirtxml.DomainClock
		wantErr string
	}{{
		name: "UTC by default",
		vmi:  newVMI(),
		want: &libvirtxml.DomainClock{Offset: "utc"},
	}, {
		name: "UTC with an offset",
		vmi:  newVMI(clock(v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{OffsetSeconds: ptr(-7200)}}})),
		want: &libvirtxml.DomainClock{Offset: "utc", Adjustment: "-7200"},
	}, {
		name: "a time zone",
		vmi:  newVMI(clock(v1.Clock{ClockOffset: v1.ClockOffset{Timezone: &tz}})),
		want: &libvirtxml.DomainClock{Offset: "timezone", TimeZone: "Europe/Berlin"},
	}, {
		name:    "an invalid time zone",
		vmi:     newVMI(clock(v1.Clock{ClockOffset: v1.ClockOffset{Timezone: &badTZ}})),
		wantErr: `spec.domain.clock.timezone: invalid time zone name`,
	}, {
		name:    "UTC and a time zone",
		vmi:     newVMI(clock(v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{}, Timezone: &tz}})),
		wantErr: "spec.domain.clock: utc and timezone are mutually exclusive",
	}, {
		name: "timers",
		vmi: newVMI(clock(v1.Clock{Timer: &v1.Timer{
			HPET: &v1.HPETTimer{Enabled: ptr(false)},
			KVM:  &v1.KVMTimer{},
			PIT:  &v1.PITTimer{TickPolicy: "delay"},
			RTC:  &v1.RTCTimer{TickPolicy: "catchup", Track: "guest"},
		}})),
		want: &libvirtxml.DomainClock{Offset: "utc", Timer: []libvirtxml.DomainTimer{
			{Name: "hpet", Present: "no"},
			{Name: "kvmclock", Present: "yes"},
			{Name: "pit", TickPolicy: "delay", Present: "yes"},
			{Name: "rtc", Track: "guest", TickPolicy: "catchup", Present: "yes"},
		}},
	}, {
		name:    "a tick policy the RTC does not have",
		vmi:     newVMI(clock(v1.Clock{Timer: &v1.Timer{RTC: &v1.RTCTimer{TickPolicy: "merge"}}})),
		wantErr: `spec.domain.clock.timer.rtc.tickPolicy: unknown tick policy "merge" (want delay or catchup)`,
	}, {
		name:    "an unknown RTC track",
		vmi:     newVMI(clock(v1.Clock{Timer: &v1.Timer{RTC: &v1.RTCTimer{Track: "moon"}}})),
		wantErr: `spec.domain.clock.timer.rtc.track: unknown track "moon"`,
	}, {
		name:    "a PIT on arm64",
		vmi:     newVMI(clock(v1.Clock{Timer: &v1.Timer{PIT: &v1.PITTimer{}}}), func(vmi *v1.VirtualMachineInstance) { vmi.Spec.Architecture = "arm64" }),
		wantErr: "spec.domain.clock.timer.pit: not supported on arm64",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dom, err := runSteps(t, tc.vmi, Options{}, (*converter).convertClock)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, dom.Clock); diff != "" {
				t.Errorf("<clock> (-want +got):\n%s", diff)
			}
		})
	}
}

var tcg128 = &libvirtxml.DomainFeatureTCG{TBCache: &libvirtxml.DomainFeatureTCGTBCache{Unit: "MiB", Size: 128}}
