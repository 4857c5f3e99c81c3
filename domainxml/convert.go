package domainxml

import (
	"errors"

	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Convert turns a VMI into the libvirt domain that runs it. It reads only
// vmi's metadata and spec, never modifies vmi, and is safe to call
// concurrently. Fields the defaulting webhook normally fills in (disk buses,
// interface models, CD-ROM read-only) are defaulted here too, so an
// undefaulted spec converts the same as a defaulted one.
//
// A spec Convert cannot express returns a *FieldError naming the field, for
// example "spec.domain.devices.disks[1].lun: not supported on bus "virtio"".
func Convert(vmi *v1.VirtualMachineInstance, opts Options) (*libvirtxml.Domain, error) {
	if vmi == nil {
		return nil, errors.New("domainxml: nil VirtualMachineInstance")
	}
	if errs := Unsupported(vmi); len(errs) > 0 {
		// Never a domain without what the VMI asked for.
		return nil, &FieldError{Field: errs[0].Field, Message: errs[0].Detail, Unsupported: true}
	}
	var c converter
	if err := c.init(vmi, &opts); err != nil {
		return nil, err
	}
	for _, convert := range []func(*converter) error{
		(*converter).convertIdentity,
		(*converter).convertOS,
		(*converter).convertCPU,
		(*converter).convertMemory,
		(*converter).convertNUMA,
		(*converter).convertFeatures,
		(*converter).convertClock,
		(*converter).convertDisks,
		(*converter).convertInterfaces,
		(*converter).convertConsole,
		(*converter).convertGuestAgent,
		(*converter).convertGraphics,
		(*converter).convertInputs,
		(*converter).convertWatchdog,
		(*converter).convertRNG,
		(*converter).convertTPM,
		(*converter).convertMemBalloon,
		(*converter).convertControllers,
		(*converter).convertSysInfo,
	} {
		if err := convert(&c); err != nil {
			return nil, err
		}
	}
	return c.dom, nil
}

// converter holds one conversion's state. Each convertX method fills in one
// part of dom; later parts may read what earlier ones decided (the vCPU
// count, whether the guest boots EFI, whether a USB controller is needed).
type converter struct {
	vmi  *v1.VirtualMachineInstance
	spec *v1.DomainSpec
	opts resolved
	dom  *libvirtxml.Domain

	// virtioModel is the model of virtio devices: transitional devices
	// work with guests that predate virtio 1.0.
	virtioModel string
	// vcpus is the number of vCPUs the guest starts with.
	vcpus uint
	// efi, secureBoot: set by convertOS.
	efi, secureBoot bool
	// needUSB, needSCSI: some device sits on that bus.
	needUSB, needSCSI bool
	// bootOrders records which device took each boot order, to reject
	// duplicates across disks and interfaces.
	bootOrders []bootOrderOwner
}

type bootOrderOwner struct {
	order uint
	field string
}

// init prepares c to convert vmi with opts.
func (c *converter) init(vmi *v1.VirtualMachineInstance, opts *Options) error {
	r, err := resolve(opts, vmi.Spec.Architecture, string(vmi.UID))
	if err != nil {
		return err
	}
	*c = converter{
		vmi:         vmi,
		spec:        &vmi.Spec.Domain,
		opts:        r,
		dom:         &libvirtxml.Domain{Devices: &libvirtxml.DomainDeviceList{}},
		virtioModel: "virtio-non-transitional",
	}
	if t := c.spec.Devices.UseVirtioTransitional; t != nil && *t {
		c.virtioModel = "virtio-transitional"
	}
	return nil
}

// newConverter returns a converter for tests that run converters one by
// one.
func newConverter(vmi *v1.VirtualMachineInstance, opts *Options) (*converter, error) {
	c := &converter{}
	return c, c.init(vmi, opts)
}

// claimBootOrder records that the device at field boots at position order.
func (c *converter) claimBootOrder(order uint, field string) error {
	if order == 0 {
		return fieldErrorf(field, "must be at least 1")
	}
	for _, o := range c.bootOrders {
		if o.order == order {
			return fieldErrorf(field, "boot order %d is already used by %s", order, o.field)
		}
	}
	c.bootOrders = append(c.bootOrders, bootOrderOwner{order, field})
	return nil
}

// enabled reports whether an optional on/off switch is on, given its default.
func enabled(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// uintPtr returns a pointer to v, for libvirtxml's optional numbers.
func uintPtr(v uint) *uint { return &v }
