package domainxml

import (
	"strconv"

	"libvirt.org/go/libvirtxml"
)

// convertConsole attaches the serial console unless
// autoattachSerialConsole is false: the first serial port on a UNIX socket
// QEMU listens on (or a pty), with virtlogd copying everything the guest
// prints to the log file, and a console that aliases it.
func (c *converter) convertConsole() error {
	if !enabled(c.spec.Devices.AutoattachSerialConsole, true) {
		return nil
	}
	src := &libvirtxml.DomainChardevSource{}
	if c.opts.SerialPTY {
		src.Pty = &libvirtxml.DomainChardevSourcePty{}
	} else {
		if !isAbs(c.opts.SerialSocket) {
			return fieldErrorf("Options.SerialSocket", "%q is not an absolute path", c.opts.SerialSocket)
		}
		src.UNIX = &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: c.opts.SerialSocket}
	}
	if !isAbs(c.opts.SerialLog) {
		return fieldErrorf("Options.SerialLog", "%q is not an absolute path", c.opts.SerialLog)
	}
	c.dom.Devices.Serials = []libvirtxml.DomainSerial{{
		Source: src,
		Target: &libvirtxml.DomainSerialTarget{Port: uintPtr(0)},
		Log:    &libvirtxml.DomainChardevLog{File: c.opts.SerialLog, Append: "on"},
	}}
	c.dom.Devices.Consoles = []libvirtxml.DomainConsole{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: uintPtr(0)},
	}}
	return nil
}

// GuestAgentChannel is the name of the virtio-serial port the QEMU guest
// agent listens on in the guest (/dev/virtio-ports/org.qemu.guest_agent.0).
const GuestAgentChannel = "org.qemu.guest_agent.0"

// convertGuestAgent adds the guest agent's channel, as KubeVirt does for
// every domain: a virtio-serial port on a UNIX socket whose path libvirt
// chooses (under its channel directory), so libvirt itself connects to the
// agent and reports whether it answers.
func (c *converter) convertGuestAgent() error {
	c.dom.Devices.Channels = []libvirtxml.DomainChannel{{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{}},
		Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: GuestAgentChannel}},
	}}
	return nil
}

// convertGraphics attaches VNC on a UNIX socket and a video device unless
// autoattachGraphicsDevice is false.
func (c *converter) convertGraphics() error {
	if !enabled(c.spec.Devices.AutoattachGraphicsDevice, true) {
		return nil
	}
	if !isAbs(c.opts.VNCSocket) {
		return fieldErrorf("Options.VNCSocket", "%q is not an absolute path", c.opts.VNCSocket)
	}
	c.dom.Devices.Graphics = []libvirtxml.DomainGraphic{{VNC: &libvirtxml.DomainGraphicVNC{
		Listeners: []libvirtxml.DomainGraphicListener{{
			Socket: &libvirtxml.DomainGraphicListenerSocket{Socket: c.opts.VNCSocket},
		}},
	}}}
	video := libvirtxml.DomainVideoModel{Type: c.opts.arch.video, Heads: 1}
	if video.Type == "vga" {
		video.VRam = 16384
	}
	c.dom.Devices.Videos = []libvirtxml.DomainVideo{{Model: video}}
	return nil
}

// convertInputs attaches spec's input devices (tablets on USB or virtio)
// and, with autoattachInputDevice, a USB tablet when spec lists none.
func (c *converter) convertInputs() error {
	inputs := c.spec.Devices.Inputs
	if len(inputs) == 0 {
		if enabled(c.spec.Devices.AutoattachInputDevice, false) {
			c.needUSB = true
			c.dom.Devices.Inputs = []libvirtxml.DomainInput{{Type: "tablet", Bus: "usb", Alias: &libvirtxml.DomainAlias{Name: "ua-default-0"}}}
		}
		return nil
	}
	out := make([]libvirtxml.DomainInput, len(inputs))
	for i, in := range inputs {
		field := "spec.domain.devices.inputs[" + strconv.Itoa(i) + "]"
		if !isDeviceName(in.Name) {
			return fieldErrorf(field+".name", "%q must be 1 to 63 letters, digits and _.- (not . or ..)", in.Name)
		}
		if in.Type != "tablet" {
			return fieldErrorf(field+".type", "unknown input type %q (want tablet)", in.Type)
		}
		bus := in.Bus
		switch bus {
		case "", "usb":
			bus = "usb"
			c.needUSB = true
		case "virtio":
		default:
			return fieldErrorf(field+".bus", "unknown bus %q (want usb or virtio)", in.Bus)
		}
		// QEMU's virtio tablet has no (non-)transitional variants.
		out[i] = libvirtxml.DomainInput{Type: "tablet", Bus: bus, Alias: &libvirtxml.DomainAlias{Name: userAlias(in.Name)}}
	}
	c.dom.Devices.Inputs = out
	return nil
}

// convertWatchdog attaches the i6300esb watchdog spec asks for.
func (c *converter) convertWatchdog() error {
	w := c.spec.Devices.Watchdog
	if w == nil {
		return nil
	}
	if !isDeviceName(w.Name) {
		return fieldErrorf("spec.domain.devices.watchdog.name", "%q must be 1 to 63 letters, digits and _.- (not . or ..)", w.Name)
	}
	if w.I6300ESB == nil {
		return fieldErrorf("spec.domain.devices.watchdog", "no watchdog model set (want i6300esb)")
	}
	if !c.opts.arch.hasI6300ESB {
		return fieldErrorf("spec.domain.devices.watchdog.i6300esb", "not supported on %s", c.opts.arch.name)
	}
	action := w.I6300ESB.Action
	switch action {
	case "":
		action = "reset"
	case "poweroff", "reset", "shutdown":
	default:
		return fieldErrorf("spec.domain.devices.watchdog.i6300esb.action", "unknown action %q (want poweroff, reset or shutdown)", action)
	}
	c.dom.Devices.Watchdogs = []libvirtxml.DomainWatchdog{{Model: "i6300esb", Action: action, Alias: &libvirtxml.DomainAlias{Name: userAlias(w.Name)}}}
	return nil
}

// convertRNG attaches a virtio RNG fed from the host's /dev/urandom.
func (c *converter) convertRNG() error {
	if c.spec.Devices.Rng == nil {
		return nil
	}
	c.dom.Devices.RNGs = []libvirtxml.DomainRNG{{
		Model:   c.virtioModel,
		Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
	}}
	return nil
}

// convertMemBalloon attaches a virtio balloon reporting statistics every
// 10 s, or none when autoattachMemBalloon is false (libvirt would add one).
func (c *converter) convertMemBalloon() error {
	if !enabled(c.spec.Devices.AutoattachMemBalloon, true) {
		c.dom.Devices.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "none"}
		return nil
	}
	c.dom.Devices.MemBalloon = &libvirtxml.DomainMemBalloon{
		Model: c.virtioModel,
		Stats: &libvirtxml.DomainMemBalloonStats{Period: 10},
	}
	return nil
}

// convertControllers adds a USB controller only when a USB device needs
// one (libvirt would otherwise add a default one) and a virtio-scsi
// controller for SCSI disks.
func (c *converter) convertControllers() error {
	usb := libvirtxml.DomainController{Type: "usb", Index: uintPtr(0), Model: "none"}
	if c.needUSB {
		usb.Model = "qemu-xhci"
	}
	ctl := []libvirtxml.DomainController{usb}
	// KubeVirt's: a guest that may get disks hot-plugged has a SCSI
	// controller from the start, as SCSI disks plug into it.
	if c.needSCSI || !c.spec.Devices.DisableHotplug {
		ctl = append(ctl, libvirtxml.DomainController{Type: "scsi", Index: uintPtr(0), Model: c.virtioModel})
	}
	pci := 0 // the USB and SCSI controllers are PCI devices, unless "none"
	for _, x := range ctl {
		if x.Model != "none" {
			pci++
		}
	}
	ctl = append(ctl, c.hotplugRootPorts(pci)...)
	c.dom.Devices.Controllers = ctl
	return nil
}

// Spare PCIe root ports for hotplug on q35, as KubeVirt's launcher keeps
// free: enough for 8 ports in all, at least 3; for a guest of more than 2
// GiB enough for 16, at least 6; at most maxRootPorts root ports in all
// (bus 0 has 32 slots).
const (
	hotplugTotalPorts      = 8
	hotplugTotalPortsLarge = 16
	hotplugFreePorts       = 3
	hotplugFreePortsLarge  = 6
	hotplugLargeMemoryKiB  = 2 << 20
	maxRootPorts           = 24
	rootPortsMargin        = 2 // devices counted loosely: a spare port or two more is harmless
	pcieRootPortModel      = "pcie-root-port"
)

// hotplugRootPorts are empty pcie-root-port controllers on a q35 guest
// that may get devices hot-plugged (a virtio disk, KubeVirt's declarative
// hotplug, needs a free root port): one per PCIe device the domain has
// (libvirt puts each on a root port, filling explicit ones first), plus
// the spare ones. pc guests have hotplug slots on their PCI bus already.
func (c *converter) hotplugRootPorts(controllers int) []libvirtxml.DomainController {
	if c.spec.Devices.DisableHotplug || c.dom.OS == nil || c.dom.OS.Type == nil || !isQ35(c.dom.OS.Type.Machine) {
		return nil
	}
	d := c.dom.Devices
	used := len(d.Interfaces) + controllers + len(d.Filesystems) + rootPortsMargin
	for _, disk := range d.Disks {
		if disk.Target != nil && disk.Target.Bus == "virtio" {
			used++
		}
	}
	for _, in := range d.Inputs {
		if in.Bus == "virtio" {
			used++
		}
	}
	if len(d.Channels) > 0 || len(d.Consoles) > 0 {
		used++ // virtio-serial
	}
	if d.MemBalloon != nil && d.MemBalloon.Model != "none" {
		used++
	}
	used += len(d.RNGs)
	total, free := hotplugTotalPorts, hotplugFreePorts
	if c.dom.Memory != nil && c.dom.Memory.Unit == "KiB" && c.dom.Memory.Value > hotplugLargeMemoryKiB {
		total, free = hotplugTotalPortsLarge, hotplugFreePortsLarge
	}
	// KubeVirt's: max(total - used, free) spare.
	n := min(used+max(total-used, free), maxRootPorts)
	ports := make([]libvirtxml.DomainController, n)
	for i := range ports {
		ports[i] = libvirtxml.DomainController{Type: "pci", Index: uintPtr(uint(i + 1)), Model: pcieRootPortModel}
	}
	return ports
}
