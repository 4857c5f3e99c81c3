package hypervisor

import (
	"fmt"

	"libvirt.org/go/libvirtxml"
)

// VirtioMem returns the domain's virtio-mem device with its size, or nil.
func VirtioMem(dom *libvirtxml.Domain) *libvirtxml.DomainMemorydev {
	if dom == nil || dom.Devices == nil {
		return nil
	}
	for i, m := range dom.Devices.Memorydevs {
		if m.Model == "virtio-mem" && m.Target != nil && m.Target.Size != nil {
			return &dom.Devices.Memorydevs[i]
		}
	}
	return nil
}

// CheckPluggable checks that a virtio-mem device can plug bytes: at most
// its size, in whole blocks.
func CheckPluggable(dev *libvirtxml.DomainMemorydev, bytes uint64) error {
	size := SizeBytes(dev.Target.Size.Value, dev.Target.Size.Unit)
	if bytes > size {
		return fmt.Errorf("%d bytes is more than the %d the virtio-mem device holds", bytes, size)
	}
	if b := dev.Target.Block; b != nil {
		if block := SizeBytes(b.Value, b.Unit); block != 0 && bytes%block != 0 {
			return fmt.Errorf("%d bytes is not a multiple of the virtio-mem block (%d bytes)", bytes, block)
		}
	}
	return nil
}

// SizeBytes converts a libvirt size in unit (libvirt's default: KiB) to
// bytes.
func SizeBytes(v uint, unit string) uint64 {
	switch unit {
	case "b", "bytes":
		return uint64(v)
	case "", "k", "KiB":
		return uint64(v) << 10
	case "M", "MiB":
		return uint64(v) << 20
	case "G", "GiB":
		return uint64(v) << 30
	case "KB":
		return uint64(v) * 1000
	case "MB":
		return uint64(v) * 1000 * 1000
	case "GB":
		return uint64(v) * 1000 * 1000 * 1000
	}
	return uint64(v) << 10
}
