// Package unsupported lists the fields of a VirtualMachineInstance that are
// valid KubeVirt but that vmkit cannot honour yet (domainxml.Unsupported),
// so that none is ever dropped from a domain silently.
package unsupported

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Fields lists the fields of vmi that vmkit accepts (they are KubeVirt's
// and valid) but cannot honour yet, each a field.Error of type
// field.ErrorTypeNotSupported naming the field, its detail starting with
// Prefix: domainxml.Unsupported.
func Fields(vmi *v1.VirtualMachineInstance) field.ErrorList {
	if vmi == nil {
		return nil
	}
	var errs field.ErrorList
	add := func(path *field.Path, format string, args ...any) {
		errs = append(errs, &field.Error{Type: field.ErrorTypeNotSupported, Field: path.String(), BadValue: field.OmitValueType{},
			Detail: Prefix + fmt.Sprintf(format, args...) + " yet"})
	}
	spec := field.NewPath("spec")
	s := &vmi.Spec
	if len(s.ResourceClaims) > 0 {
		add(spec.Child("resourceClaims"), "attach dynamically allocated resources")
	}
	if len(s.UtilityVolumes) > 0 {
		add(spec.Child("utilityVolumes"), "attach utility volumes")
	}
	for i, vol := range s.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case vol.DownwardMetrics != nil:
			add(p.Child("downwardMetrics"), "serve downward metrics")
		case vol.ContainerPath != nil:
			add(p.Child("containerPath"), "share container paths with the guest")
		}
	}

	dom := &s.Domain
	dp := spec.Child("domain")
	if dom.LaunchSecurity != nil {
		add(dp.Child("launchSecurity"), "launch confidential guests")
	}
	if dom.Chassis != nil {
		add(dp.Child("chassis"), "set the SMBIOS chassis")
	}
	if dom.RebootPolicy != nil && *dom.RebootPolicy == v1.RebootPolicyTerminate {
		add(dp.Child("rebootPolicy"), "end a VMI on a guest reboot")
	}
	if fw := dom.Firmware; fw != nil && fw.ACPI != nil {
		add(dp.Child("firmware", "acpi"), "add ACPI tables")
	}
	if m := dom.Memory; m != nil && m.ReservedOverhead != nil {
		add(dp.Child("memory", "reservedOverhead"), "adjust the reserved memory overhead")
	}
	if cpu := dom.CPU; cpu != nil {
		if cpu.Realtime != nil {
			add(dp.Child("cpu", "realtime"), "tune guests for realtime")
		}
	}

	d := &dom.Devices
	devp := dp.Child("devices")
	if len(d.GPUs) > 0 {
		add(devp.Child("gpus"), "give guests GPUs")
	}
	if len(d.HostDevices) > 0 {
		add(devp.Child("hostDevices"), "give guests host devices")
	}
	if d.Sound != nil {
		add(devp.Child("sound"), "give guests a sound device")
	}
	if d.Video != nil {
		add(devp.Child("video"), "choose the video device's type")
	}
	if len(d.PanicDevices) > 0 {
		add(devp.Child("panicDevices"), "give guests panic devices")
	}
	if len(d.Filesystems) > 0 {
		add(devp.Child("filesystems"), "share file systems with guests (no virtiofsd in the launcher)")
	}
	if d.DownwardMetrics != nil {
		add(devp.Child("downwardMetrics"), "serve downward metrics")
	}
	if d.ClientPassthrough != nil {
		add(devp.Child("clientPassthrough"), "pass client USB devices through")
	}
	if d.AutoattachVSOCK != nil && *d.AutoattachVSOCK {
		add(devp.Child("autoattachVSOCK"), "give guests a VSOCK device")
	}
	if d.Watchdog != nil && d.Watchdog.Diag288 != nil {
		add(devp.Child("watchdog", "diag288"), "give guests a diag288 watchdog")
	}
	for i, disk := range d.Disks {
		p := devp.Child("disks").Index(i)
		if disk.BlockSize != nil {
			add(p.Child("blockSize"), "set disk block sizes")
		}
		if disk.ErrorPolicy != nil {
			add(p.Child("errorPolicy"), "set disk error policies")
		}
		if disk.ChangedBlockTracking != nil && *disk.ChangedBlockTracking {
			add(p.Child("changedBlockTracking"), "track changed blocks")
		}
	}
	for i, iface := range d.Interfaces {
		p := devp.Child("interfaces").Index(i)
		b := iface.InterfaceBindingMethod
		switch {
		case b.SRIOV != nil:
			add(p.Child("sriov"), "bind interfaces with SR-IOV (use bridge, masquerade or passtBinding)")
		case b.Slirp != nil:
			add(p.Child("slirp"), "bind interfaces with slirp (use bridge, masquerade or passtBinding)")
		case b.Macvtap != nil:
			add(p.Child("macvtap"), "bind interfaces with macvtap (use bridge, masquerade or passtBinding)")
		case b.Passt != nil:
			add(p.Child("passt"), "bind interfaces with the discontinued passt plugin (use passtBinding)")
		case b.Binding != nil:
			add(p.Child("binding"), "run network binding plugins (use bridge, masquerade or passtBinding)")
		}
		if iface.State == v1.InterfaceStateAbsent {
			add(p.Child("state"), "unplug an interface (state %s)", iface.State)
		}
	}
	return errs
}

// Prefix starts the detail of every error Fields returns, which tells
// them from validation's NotSupported errors (a value outside an enum).
const Prefix = "vmkit cannot "
