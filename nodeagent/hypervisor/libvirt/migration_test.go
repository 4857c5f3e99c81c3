package libvirt

import (
	"fmt"
	"slices"
	"testing"

	golibvirt "libvirt.org/go/libvirt"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// TestDisksToCopy: the launcher's own disks are copied; claims are left in
// place, and a claim's file disk makes the migration skip libvirt's check
// of the file system (which knows NFS but not every shared storage); a
// Block claim and a CD-ROM do not.
func TestDisksToCopy(t *testing.T) {
	const domain = `<domain type="qemu"><name>d</name><devices>
  <disk type="file" device="disk"><source file="/var/run/kubevirt-ephemeral-disks/disk-data/root/disk.qcow2"/><target dev="vda"/></disk>
  <disk type="block" device="disk"><source dev="/dev/data"/><target dev="vdb"/></disk>
  <disk type="file" device="cdrom"><source file="/var/run/kubevirt-private/vmi-disks/iso/disk.img"/><target dev="sdb"/></disk>
  %s
</devices></domain>`
	opts := hypervisor.MigrateOptions{
		CopyDisksUnder:   []string{"/var/run/kubevirt-ephemeral-disks"},
		SharedDisksUnder: []string{"/var/run/kubevirt-private/vmi-disks", "/var/run/kubevirt/hotplug-disks"},
	}
	for _, tc := range []struct {
		name, disk string
		shared     bool
	}{
		{"no claim file", "", false},
		{"a claim's file", `<disk type="file" device="disk"><source file="/var/run/kubevirt-private/vmi-disks/data/disk.img"/><target dev="vdc"/></disk>`, true},
		{"a hotplugged claim's file", `<disk type="file" device="disk"><source file="/var/run/kubevirt/hotplug-disks/hp/disk.img"/><target dev="sda"/></disk>`, true},
		{"a hotplugged Block claim", `<disk type="block" device="disk"><source dev="/var/run/kubevirt/hotplug-disks/hp"/><target dev="sda"/></disk>`, false},
		{"a file beside the claims", `<disk type="file" device="disk"><source file="/var/run/kubevirt-private/vmi-disks-other/disk.img"/><target dev="vdc"/></disk>`, false},
	} {
		xml := fmt.Sprintf(domain, tc.disk)
		copied, shared, err := disksToCopy(xml, opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(copied, []string{"vda"}) || shared != tc.shared {
			t.Errorf("%s: copies %v, shared %v; want [vda], %v", tc.name, copied, shared, tc.shared)
		}
		// Migrate's flags: unsafe exactly when a shared file disk stays.
		o := opts
		o.Unsafe = shared
		if got := migrationFlags(o, false)&golibvirt.MIGRATE_UNSAFE != 0; got != tc.shared {
			t.Errorf("%s: MIGRATE_UNSAFE %v", tc.name, got)
		}
	}
}
