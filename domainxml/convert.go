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
	var c converter
	if err := c.init(vmi, &opts); err != nil {
		return nil, err
	}
	// Called one by one, not through a table of method values, so the
	// converter stays on the stack.
	if err := c.convertIdentity(); err != nil {
		return nil, err
	}
	if err := c.convertOS(); err != nil {
		return nil, err
	}
	if err := c.convertCPU(); err != nil {
		return nil, err
	}
	if err := c.convertMemory(); err != nil {
		return nil, err
	}
	if err := c.convertFeatures(); err != nil {
		return nil, err
	}
	if err := c.convertClock(); err != nil {
		return nil, err
	}
	if err := c.convertDisks(); err != nil {
		return nil, err
	}
	if err := c.convertInterfaces(); err != nil {
		return nil, err
	}
	if err := c.convertConsole(); err != nil {
		return nil, err
	}
	if err := c.convertGuestAgent(); err != nil {
		return nil, err
	}
	if err := c.convertGraphics(); err != nil {
		return nil, err
	}
	if err := c.convertInputs(); err != nil {
		return nil, err
	}
	if err := c.convertWatchdog(); err != nil {
		return nil, err
	}
	if err := c.convertRNG(); err != nil {
		return nil, err
	}
	if err := c.convertMemBalloon(); err != nil {
		return nil, err
	}
	if err := c.convertControllers(); err != nil {
		return nil, err
	}
	if err := c.convertSysInfo(); err != nil {
		return nil, err
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
	// a holds the fixed-size parts of dom, allocated at once.
	a *arena

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

// arena is every fixed-size piece of a domain in one allocation.
type arena struct {
	dom         libvirtxml.Domain
	metadata    libvirtxml.DomainMetadata
	memory      libvirtxml.DomainMemory
	vcpu        libvirtxml.DomainVCPU
	os          libvirtxml.DomainOS
	osType      libvirtxml.DomainOSType
	smbios      libvirtxml.DomainSMBios
	sysinfo     [1]libvirtxml.DomainSysInfo
	sysSMBIOS   libvirtxml.DomainSysInfoSMBIOS
	sysSystem   libvirtxml.DomainSysInfoSystem
	sysEntries  [7]libvirtxml.DomainSysInfoEntry
	features    libvirtxml.DomainFeatureList
	acpi        libvirtxml.DomainFeature
	cpu         libvirtxml.DomainCPU
	topology    libvirtxml.DomainCPUTopology
	clock       libvirtxml.DomainClock
	devices     libvirtxml.DomainDeviceList
	serial      [1]libvirtxml.DomainSerial
	console     [1]libvirtxml.DomainConsole
	serialSrc   libvirtxml.DomainChardevSource
	serialUNIX  libvirtxml.DomainChardevSourceUNIX
	consoleSrc  libvirtxml.DomainChardevSource
	pty         libvirtxml.DomainChardevSourcePty
	serialTgt   libvirtxml.DomainSerialTarget
	consoleTgt  libvirtxml.DomainConsoleTarget
	serialLog   libvirtxml.DomainChardevLog
	serialPort  uint
	consolePort uint
	channel     [1]libvirtxml.DomainChannel
	agentSrc    libvirtxml.DomainChardevSource
	agentUNIX   libvirtxml.DomainChardevSourceUNIX
	agentTgt    libvirtxml.DomainChannelTarget
	agentVirtIO libvirtxml.DomainChannelTargetVirtIO
	ctlIndex    [2]uint
	graphics    [1]libvirtxml.DomainGraphic
	vnc         libvirtxml.DomainGraphicVNC
	listeners   [1]libvirtxml.DomainGraphicListener
	vncSocket   libvirtxml.DomainGraphicListenerSocket
	video       [1]libvirtxml.DomainVideo
	balloon     libvirtxml.DomainMemBalloon
	stats       libvirtxml.DomainMemBalloonStats
	controller  [2]libvirtxml.DomainController
}

// init prepares c to convert vmi with opts.
func (c *converter) init(vmi *v1.VirtualMachineInstance, opts *Options) error {
	r, err := resolve(opts, vmi.Spec.Architecture, string(vmi.UID))
	if err != nil {
		return err
	}
	a := &arena{}
	a.dom.Devices = &a.devices
	*c = converter{
		vmi:         vmi,
		spec:        &vmi.Spec.Domain,
		opts:        r,
		dom:         &a.dom,
		a:           a,
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
