package instancetype

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// ApplyPreference fills what spec and meta leave unset with the preference's
// preferred values, as KubeVirt does. A nil preference changes nothing.
// Two fields the API cannot tell unset from false are overridden when the
// preference sets them, as in KubeVirt: features.acpi and
// devices.disableHotplug.
func ApplyPreference(spec *v1.VirtualMachineInstanceSpec, meta *metav1.ObjectMeta, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	if pref == nil {
		return
	}
	applyCPUPreferences(spec, pref)
	applyDevicePreferences(spec, pref)
	applyFeaturePreferences(spec, pref)
	applyFirmwarePreferences(spec, pref)
	if m := pref.Machine; m != nil && m.PreferredMachineType != "" {
		if spec.Domain.Machine == nil {
			spec.Domain.Machine = &v1.Machine{}
		}
		if spec.Domain.Machine.Type == "" {
			spec.Domain.Machine.Type = m.PreferredMachineType
		}
	}
	applyClockPreferences(spec, pref)
	if spec.Subdomain == "" && pref.PreferredSubdomain != nil {
		spec.Subdomain = *pref.PreferredSubdomain
	}
	if spec.TerminationGracePeriodSeconds == nil && pref.PreferredTerminationGracePeriodSeconds != nil {
		s := *pref.PreferredTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &s
	}
	if spec.Architecture == "" && pref.PreferredArchitecture != nil {
		spec.Architecture = *pref.PreferredArchitecture
	}
	if meta != nil && len(pref.Annotations) > 0 {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		for k, v := range pref.Annotations {
			if _, ok := meta.Annotations[k]; !ok {
				meta.Annotations[k] = v
			}
		}
	}
	if spec.Domain.LaunchSecurity == nil && pref.PreferredLaunchSecurity != nil {
		spec.Domain.LaunchSecurity = pref.PreferredLaunchSecurity.DeepCopy()
	}
}

func applyCPUPreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	if pref.CPU == nil || len(pref.CPU.PreferredCPUFeatures) == 0 {
		return
	}
	if spec.Domain.CPU == nil {
		spec.Domain.CPU = &v1.CPU{}
	}
	have := map[string]bool{}
	for _, f := range spec.Domain.CPU.Features {
		have[f.Name] = true
	}
	for _, f := range pref.CPU.PreferredCPUFeatures {
		if !have[f.Name] {
			spec.Domain.CPU.Features = append(spec.Domain.CPU.Features, f)
		}
	}
}

// setBool sets *dst to a copy of *pref when the preference has a value and
// dst does not.
func setBool(dst **bool, pref *bool) {
	if pref != nil && *dst == nil {
		b := *pref
		*dst = &b
	}
}

// ApplyAutoattachPreferences applies only a preference's
// preferredAutoattach* values. KubeVirt applies them before adding the
// default network interface and input devices, which they govern.
func ApplyAutoattachPreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	if pref == nil || pref.Devices == nil {
		return
	}
	d, p := &spec.Domain.Devices, pref.Devices
	setBool(&d.AutoattachGraphicsDevice, p.PreferredAutoattachGraphicsDevice)
	setBool(&d.AutoattachMemBalloon, p.PreferredAutoattachMemBalloon)
	setBool(&d.AutoattachPodInterface, p.PreferredAutoattachPodInterface)
	setBool(&d.AutoattachSerialConsole, p.PreferredAutoattachSerialConsole)
	setBool(&d.AutoattachInputDevice, p.PreferredAutoattachInputDevice)
}

func applyDevicePreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	if pref.Devices == nil {
		return
	}
	d, p := &spec.Domain.Devices, pref.Devices
	setBool(&d.UseVirtioTransitional, p.PreferredUseVirtioTransitional)
	setBool(&d.BlockMultiQueue, p.PreferredBlockMultiQueue)
	setBool(&d.NetworkInterfaceMultiQueue, p.PreferredNetworkInterfaceMultiQueue)
	if p.PreferredDisableHotplug != nil {
		d.DisableHotplug = *p.PreferredDisableHotplug
	}
	if p.PreferredSoundModel != "" && d.Sound != nil && d.Sound.Model == "" {
		d.Sound.Model = p.PreferredSoundModel
	}
	if p.PreferredRng != nil && d.Rng == nil {
		d.Rng = p.PreferredRng.DeepCopy()
	}
	if p.PreferredTPM != nil && d.TPM == nil {
		d.TPM = p.PreferredTPM.DeepCopy()
	}
	if p.PreferredVideoType != nil {
		if d.Video == nil {
			d.Video = &v1.VideoDevice{}
		}
		if d.Video.Type == "" {
			d.Video.Type = *p.PreferredVideoType
		}
	}
	ApplyAutoattachPreferences(spec, pref)
	applyDiskPreferences(d, p)
	ApplyInterfacePreferences(spec, pref)
	for i := range d.Inputs {
		in := &d.Inputs[i]
		if p.PreferredInputBus != "" && in.Bus == "" {
			in.Bus = string(p.PreferredInputBus)
		}
		if p.PreferredInputType != "" && in.Type == "" {
			in.Type = string(p.PreferredInputType)
		}
	}
	if p.PreferredPanicDeviceModel != nil {
		if len(d.PanicDevices) == 0 {
			m := *p.PreferredPanicDeviceModel
			d.PanicDevices = []v1.PanicDevice{{Model: &m}}
		}
		for i := range d.PanicDevices {
			if d.PanicDevices[i].Model == nil {
				m := *p.PreferredPanicDeviceModel
				d.PanicDevices[i].Model = &m
			}
		}
	}
}

func applyDiskPreferences(d *v1.Devices, p *instancetypev1beta1.DevicePreferences) {
	for i := range d.Disks {
		disk := &d.Disks[i]
		if disk.Disk == nil && disk.CDRom == nil && disk.LUN == nil {
			disk.Disk = &v1.DiskTarget{}
		}
		switch {
		case disk.Disk != nil:
			if p.PreferredDiskBus != "" && disk.Disk.Bus == "" {
				disk.Disk.Bus = p.PreferredDiskBus
			}
			if p.PreferredDiskBlockSize != nil && disk.BlockSize == nil {
				disk.BlockSize = p.PreferredDiskBlockSize.DeepCopy()
			}
			if p.PreferredDiskCache != "" && disk.Cache == "" {
				disk.Cache = p.PreferredDiskCache
			}
			if p.PreferredDiskIO != "" && disk.IO == "" {
				disk.IO = p.PreferredDiskIO
			}
			if disk.Disk.Bus == v1.DiskBusVirtio {
				setBool(&disk.DedicatedIOThread, p.PreferredDiskDedicatedIoThread)
			}
		case disk.CDRom != nil:
			if p.PreferredCdromBus != "" && disk.CDRom.Bus == "" {
				disk.CDRom.Bus = p.PreferredCdromBus
			}
		case disk.LUN != nil:
			if p.PreferredLunBus != "" && disk.LUN.Bus == "" {
				disk.LUN.Bus = p.PreferredLunBus
			}
		}
	}
}

// ApplyInterfacePreferences applies a preference's interface model, and its
// masquerade binding to pod-network interfaces that name no binding. The VM
// controller applies it again to the interface defaulting adds, as KubeVirt
// adds that interface before it applies preferences.
func ApplyInterfacePreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	if pref == nil || pref.Devices == nil {
		return
	}
	p := pref.Devices
	for i := range spec.Domain.Devices.Interfaces {
		iface := &spec.Domain.Devices.Interfaces[i]
		if p.PreferredInterfaceModel != "" && iface.Model == "" {
			iface.Model = p.PreferredInterfaceModel
		}
		if p.PreferredInterfaceMasquerade != nil && iface.InterfaceBindingMethod == (v1.InterfaceBindingMethod{}) && onPodNetwork(spec, iface.Name) {
			iface.Masquerade = p.PreferredInterfaceMasquerade.DeepCopy()
		}
	}
}

func onPodNetwork(spec *v1.VirtualMachineInstanceSpec, name string) bool {
	for _, n := range spec.Networks {
		if n.Name == name {
			return n.Pod != nil
		}
	}
	return false
}

func applyFeaturePreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	p := pref.Features
	if p == nil {
		return
	}
	if spec.Domain.Features == nil {
		spec.Domain.Features = &v1.Features{}
	}
	f := spec.Domain.Features
	if p.PreferredAcpi != nil {
		f.ACPI = *p.PreferredAcpi.DeepCopy()
	}
	if p.PreferredApic != nil && f.APIC == nil {
		f.APIC = p.PreferredApic.DeepCopy()
	}
	if p.PreferredHyperv != nil {
		if f.Hyperv == nil {
			f.Hyperv = &v1.FeatureHyperv{}
		}
		applyHypervPreferences(f.Hyperv, p.PreferredHyperv)
	}
	if p.PreferredKvm != nil && f.KVM == nil {
		f.KVM = p.PreferredKvm.DeepCopy()
	}
	if p.PreferredPvspinlock != nil && f.Pvspinlock == nil {
		f.Pvspinlock = p.PreferredPvspinlock.DeepCopy()
	}
	if p.PreferredSmm != nil && f.SMM == nil {
		f.SMM = p.PreferredSmm.DeepCopy()
	}
}

// applyHypervPreferences sets each enlightenment the template leaves unset.
func applyHypervPreferences(h, p *v1.FeatureHyperv) {
	state := func(dst **v1.FeatureState, pref *v1.FeatureState) {
		if pref != nil && *dst == nil {
			*dst = pref.DeepCopy()
		}
	}
	state(&h.Relaxed, p.Relaxed)
	state(&h.VAPIC, p.VAPIC)
	state(&h.VPIndex, p.VPIndex)
	state(&h.Runtime, p.Runtime)
	state(&h.SyNIC, p.SyNIC)
	state(&h.Reset, p.Reset)
	state(&h.Frequencies, p.Frequencies)
	state(&h.Reenlightenment, p.Reenlightenment)
	state(&h.IPI, p.IPI)
	state(&h.EVMCS, p.EVMCS)
	if p.Spinlocks != nil && h.Spinlocks == nil {
		h.Spinlocks = p.Spinlocks.DeepCopy()
	}
	if p.SyNICTimer != nil && h.SyNICTimer == nil {
		h.SyNICTimer = p.SyNICTimer.DeepCopy()
	}
	if p.VendorID != nil && h.VendorID == nil {
		h.VendorID = p.VendorID.DeepCopy()
	}
	if p.TLBFlush != nil && h.TLBFlush == nil {
		h.TLBFlush = p.TLBFlush.DeepCopy()
	}
}

func applyFirmwarePreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	p := pref.Firmware
	if p == nil {
		return
	}
	if spec.Domain.Firmware == nil {
		spec.Domain.Firmware = &v1.Firmware{}
	}
	fw := spec.Domain.Firmware
	if fw.Bootloader == nil {
		fw.Bootloader = &v1.Bootloader{}
	}
	bl := fw.Bootloader
	none := bl.BIOS == nil && bl.EFI == nil
	preferredEfi := false
	switch {
	case none && p.PreferredUseBios != nil && *p.PreferredUseBios:
		bl.BIOS = &v1.BIOS{}
	case none && p.PreferredEfi != nil:
		bl.EFI = p.PreferredEfi.DeepCopy()
		preferredEfi = true
	case none && p.DeprecatedPreferredUseEfi != nil && *p.DeprecatedPreferredUseEfi:
		bl.EFI = &v1.EFI{}
	}
	if bl.BIOS != nil {
		setBool(&bl.BIOS.UseSerial, p.PreferredUseBiosSerial)
	}
	// The deprecated secure boot preference does not touch a preferredEfi.
	if bl.EFI != nil && !preferredEfi {
		setBool(&bl.EFI.SecureBoot, p.DeprecatedPreferredUseSecureBoot)
	}
	if *bl == (v1.Bootloader{}) {
		fw.Bootloader = nil
	}
}

func applyClockPreferences(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	p := pref.Clock
	if p == nil || (p.PreferredClockOffset == nil && p.PreferredTimer == nil) {
		return
	}
	if spec.Domain.Clock == nil {
		spec.Domain.Clock = &v1.Clock{}
	}
	c := spec.Domain.Clock
	// Only a whole offset: never mix the template's and the preference's.
	if p.PreferredClockOffset != nil && c.UTC == nil && c.Timezone == nil {
		c.ClockOffset = *p.PreferredClockOffset.DeepCopy()
	}
	if p.PreferredTimer != nil && c.Timer == nil {
		c.Timer = p.PreferredTimer.DeepCopy()
	}
}
