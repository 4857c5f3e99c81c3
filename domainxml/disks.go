package domainxml

import (
	"path"
	"strconv"

	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// volumeKind says what backs a volume and how the launcher provides it.
type volumeKind int

const (
	kindImage     volumeKind = iota // a disk image: PVC, DataVolume, hostDisk
	kindEphemeral                   // a qcow2 overlay or empty disk the launcher created
	kindISO                         // a read-only ISO the launcher generated
)

// convertDisks attaches spec.domain.devices.disks, each backed by the volume
// of the same name. Target names are allocated in spec order per name
// prefix: vda, vdb, … for virtio and sda, sdb, … for SATA, SCSI and USB.
func (c *converter) convertDisks() error {
	disks := c.spec.Devices.Disks
	if len(disks) == 0 {
		return nil
	}
	out := make([]libvirtxml.DomainDisk, len(disks))
	io, err := c.planIOThreads()
	if err != nil {
		return err
	}
	var nVD, nSD int
	skip := make([]bool, len(disks))
	for i := range disks {
		d := &disks[i]
		if !isDeviceName(d.Name) {
			return fieldErrorf(diskField(i, "name"), "%q must be 1 to 63 letters, digits and _.- (not . or ..)", d.Name)
		}
		dev, bus, readOnly, err := diskDevice(d, i)
		if err != nil {
			return err
		}
		vol, err := c.findVolume(d.Name, i)
		if err != nil {
			return err
		}
		hotplug := v1.IsHotpluggable(vol)
		if hotplug && dev == "cdrom" || hotplug && bus != v1.DiskBusSCSI && bus != v1.DiskBusVirtio {
			return fieldErrorf(diskField(i, ""), "volume %q is hotpluggable: its disk must be a disk or lun on bus scsi or virtio (the buses that take devices while the guest runs), not a %s on bus %q", d.Name, dev, bus)
		}
		if _, ok := c.opts.Disks[vol.Name]; hotplug && !ok {
			// Attached once the guest runs (HotplugDisk); its target name
			// stays reserved so the others keep theirs.
			skip[i] = true
			if bus == v1.DiskBusVirtio {
				nVD++
			} else {
				nSD++
			}
			continue
		}
		src, kind, err := c.volumeSource(vol)
		if err != nil {
			return err
		}
		if kind == kindISO {
			readOnly = true
		}
		if readOnly && dev == "disk" && bus == v1.DiskBusSATA {
			// QEMU's ide-hd device, which SATA disks use, cannot be read-only.
			if kind == kindISO {
				return fieldErrorf(diskField(i, "disk.bus"), "volume %q is a read-only ISO and SATA disks cannot be read-only; use a cdrom or another bus", d.Name)
			}
			return fieldErrorf(diskField(i, "disk.readonly"), "not supported on bus %q", bus)
		}
		if dev == "lun" && !src.Block {
			return fieldErrorf(diskField(i, "lun"), "needs a block volume; volume %q is a file", d.Name)
		}

		var target string
		if bus == v1.DiskBusVirtio {
			target, nVD = targetName("vd", nVD), nVD+1
		} else {
			target, nSD = targetName("sd", nSD), nSD+1
		}
		switch bus {
		case v1.DiskBusUSB:
			c.needUSB = true
		case v1.DiskBusSCSI:
			c.needSCSI = true
		}

		out[i].Device = dev
		if bus == v1.DiskBusVirtio {
			out[i].Model = c.virtioModel
		}
		out[i].Target = &libvirtxml.DomainDiskTarget{Dev: target, Bus: string(bus)}
		if d.CDRom != nil && d.CDRom.Tray == v1.TrayStateOpen {
			out[i].Target.Tray = "open"
		}

		if src.Block {
			out[i].Source = &libvirtxml.DomainDiskSource{Block: &libvirtxml.DomainDiskSourceBlock{Dev: src.Path}}
		} else {
			out[i].Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: src.Path}}
		}

		out[i].Driver, err = c.diskDriver(d, i, bus, dev, readOnly, src.Format, io.threadOf(i))
		if err != nil {
			return err
		}
		if readOnly {
			out[i].ReadOnly = &libvirtxml.DomainDiskReadOnly{}
		}
		if enabled(d.Shareable, false) {
			out[i].Shareable = &libvirtxml.DomainDiskShareable{}
		}
		if d.Serial != "" {
			if !isToken(d.Serial, 36, "_.+-") {
				return fieldErrorf(diskField(i, "serial"), "%q must be 1 to 36 letters, digits and _.+-", d.Serial)
			}
			out[i].Serial = d.Serial
		}
		if d.BootOrder != nil {
			if err := c.claimBootOrder(*d.BootOrder, diskField(i, "bootOrder")); err != nil {
				return err
			}
			out[i].Boot = &libvirtxml.DomainDeviceBoot{Order: *d.BootOrder}
		}
		out[i].Alias = &libvirtxml.DomainAlias{Name: userAlias(d.Name)}
		if d.Disk != nil && d.Disk.PciAddress != "" {
			if bus != v1.DiskBusVirtio {
				return fieldErrorf(diskField(i, "disk.pciAddress"), "only virtio disks sit on PCI, this one is on bus %q", bus)
			}
			addr, err := parsePCIAddress(d.Disk.PciAddress)
			if err != nil {
				return fieldErrorf(diskField(i, "disk.pciAddress"), "%v", err)
			}
			out[i].Address = addr
		}
	}
	if io.count > 0 {
		c.dom.IOThreads = io.count
	}
	kept := out[:0]
	for i := range out {
		if !skip[i] {
			kept = append(kept, out[i])
		}
	}
	c.dom.Devices.Disks = kept
	return nil
}

// diskDevice returns how disk i is exposed ("disk", "lun" or "cdrom"), its
// bus with the defaults filled in, and whether spec makes it read-only.
func diskDevice(d *v1.Disk, i int) (dev string, bus v1.DiskBus, readOnly bool, err error) {
	n := 0
	for _, set := range [...]bool{d.Disk != nil, d.LUN != nil, d.CDRom != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return "", "", false, fieldErrorf(diskField(i, ""), "may set only one of disk, lun and cdrom")
	}
	switch {
	case d.LUN != nil:
		if d.LUN.Reservation {
			return "", "", false, fieldErrorf(diskField(i, "lun.reservation"), "SCSI persistent reservations are not supported")
		}
		bus = orBus(d.LUN.Bus, v1.DiskBusSCSI)
		if bus != v1.DiskBusSCSI {
			return "", "", false, fieldErrorf(diskField(i, "lun"), "not supported on bus %q", bus)
		}
		return "lun", bus, d.LUN.ReadOnly, nil
	case d.CDRom != nil:
		bus = orBus(d.CDRom.Bus, v1.DiskBusSATA)
		switch bus {
		case v1.DiskBusSATA, v1.DiskBusSCSI, v1.DiskBusUSB:
		case v1.DiskBusVirtio:
			return "", "", false, fieldErrorf(diskField(i, "cdrom"), "not supported on bus %q", bus)
		default:
			return "", "", false, fieldErrorf(diskField(i, "cdrom.bus"), "unknown bus %q (want sata, scsi or usb)", bus)
		}
		if !enabled(d.CDRom.ReadOnly, true) {
			return "", "", false, fieldErrorf(diskField(i, "cdrom.readonly"), "a CD-ROM is always read-only")
		}
		switch d.CDRom.Tray {
		case "", v1.TrayStateOpen, v1.TrayStateClosed:
		default:
			return "", "", false, fieldErrorf(diskField(i, "cdrom.tray"), "unknown tray state %q (want open or closed)", d.CDRom.Tray)
		}
		return "cdrom", bus, true, nil
	default:
		var t v1.DiskTarget
		if d.Disk != nil {
			t = *d.Disk
		}
		bus = orBus(t.Bus, v1.DiskBusVirtio)
		switch bus {
		case v1.DiskBusVirtio, v1.DiskBusSATA, v1.DiskBusSCSI, v1.DiskBusUSB:
		default:
			return "", "", false, fieldErrorf(diskField(i, "disk.bus"), "unknown bus %q (want virtio, sata, scsi or usb)", bus)
		}
		return "disk", bus, t.ReadOnly, nil
	}
}

// diskDriver returns QEMU's block driver settings for disk i: the image
// format, cache and I/O modes, error policy, I/O thread and queues.
func (c *converter) diskDriver(d *v1.Disk, i int, bus v1.DiskBus, dev string, readOnly bool, format string, ioThread uint) (*libvirtxml.DomainDiskDriver, error) {
	if enabled(d.DedicatedIOThread, false) && bus != v1.DiskBusVirtio {
		return nil, fieldErrorf(diskField(i, "dedicatedIOThread"), "only virtio disks have I/O threads, this one is on bus %q", bus)
	}
	cache := string(d.Cache)
	switch d.Cache {
	case "", v1.CacheNone, v1.CacheWriteThrough, v1.CacheWriteBack:
	default:
		return nil, fieldErrorf(diskField(i, "cache"), "unknown cache mode %q (want none, writethrough or writeback)", d.Cache)
	}
	switch d.IO {
	case "", v1.IOThreads:
	case v1.IONative:
		// QEMU's native AIO needs O_DIRECT, which is what cache=none means.
		switch d.Cache {
		case "":
			cache = string(v1.CacheNone)
		case v1.CacheNone:
		default:
			return nil, fieldErrorf(diskField(i, "io"), "native I/O needs cache mode none, not %q", d.Cache)
		}
	default:
		return nil, fieldErrorf(diskField(i, "io"), "unknown I/O mode %q (want native or threads)", d.IO)
	}
	if enabled(d.Shareable, false) {
		// Guests sharing a disk must not see stale host-cached data.
		switch d.Cache {
		case "":
			cache = string(v1.CacheNone)
		case v1.CacheNone:
		default:
			return nil, fieldErrorf(diskField(i, "shareable"), "a shareable disk needs cache mode none, not %q", d.Cache)
		}
	}
	drv := &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format, Cache: cache, ErrorPolicy: "stop", IO: string(d.IO)}
	if !readOnly && dev == "disk" {
		drv.Discard = "unmap"
	}
	if ioThread != 0 {
		drv.IOThread = uintPtr(ioThread)
	}
	if bus == v1.DiskBusVirtio && enabled(c.spec.Devices.BlockMultiQueue, false) && c.vcpus > 1 {
		drv.Queues = uintPtr(c.vcpus)
	}
	return drv, nil
}

// findVolume returns the volume backing disk i.
func (c *converter) findVolume(name string, i int) (*v1.Volume, error) {
	vols := c.vmi.Spec.Volumes
	for j := range vols {
		if vols[j].Name == name {
			return &vols[j], nil
		}
	}
	return nil, fieldErrorf(diskField(i, "name"), "no volume named %q in spec.volumes", name)
}

// volumeSource is where the launcher put vol's image: Options.Disks[name],
// else the volume kind's default path.
func (c *converter) volumeSource(vol *v1.Volume) (DiskSource, volumeKind, error) {
	var (
		kind   volumeKind
		def    string
		format = "raw"
	)
	eph, priv := c.opts.EphemeralDiskDir, c.opts.PrivateDir
	s := &vol.VolumeSource
	switch {
	case s.ContainerDisk != nil, s.Ephemeral != nil:
		kind, format = kindEphemeral, "qcow2"
		def = eph + "/disk-data/" + vol.Name + "/disk.qcow2"
	case s.EmptyDisk != nil:
		kind, format = kindEphemeral, "qcow2"
		def = eph + "/empty-disks/" + vol.Name + ".qcow2"
	case s.PersistentVolumeClaim != nil, s.DataVolume != nil:
		def = priv + "/vmi-disks/" + vol.Name + "/disk.img"
	case s.HostDisk != nil:
		// The launcher pod mounts the image's directory of the node at
		// <PrivateDir>/vmi-disks/<volume>.
		p := s.HostDisk.Path
		if !isAbs(p) {
			return DiskSource{}, 0, fieldErrorf(c.volumeField(vol, "hostDisk.path"), "%q is not an absolute path", p)
		}
		base := path.Base(p)
		if base == "." || base == ".." || base == "/" {
			return DiskSource{}, 0, fieldErrorf(c.volumeField(vol, "hostDisk.path"), "%q does not end in a file name", p)
		}
		def = priv + "/vmi-disks/" + vol.Name + "/" + base
	case s.CloudInitNoCloud != nil, s.CloudInitConfigDrive != nil:
		kind = kindISO
		if p, ok := c.opts.CloudInitISOs[vol.Name]; ok {
			if !isAbs(p) {
				return DiskSource{}, 0, fieldErrorf("Options.CloudInitISOs["+strconv.Quote(vol.Name)+"]", "%q is not an absolute path", p)
			}
			return DiskSource{Path: p, Format: "raw"}, kind, nil
		}
		iso := "/noCloud.iso"
		if s.CloudInitConfigDrive != nil {
			iso = "/configdrive.iso"
		}
		def = eph + "/cloud-init-data/" + c.vmi.Namespace + "/" + c.vmi.Name + iso
	case s.ConfigMap != nil:
		kind, def = kindISO, priv+"/config-map-disks/"+vol.Name+".iso"
	case s.Secret != nil:
		kind, def = kindISO, priv+"/secret-disks/"+vol.Name+".iso"
	case s.DownwardAPI != nil:
		kind, def = kindISO, priv+"/downwardapi-disks/"+vol.Name+".iso"
	case s.ServiceAccount != nil:
		kind, def = kindISO, priv+"/service-account-disk/service-account.iso"
	case s.Sysprep != nil:
		return DiskSource{}, 0, fieldErrorf(c.volumeField(vol, "sysprep"), "not supported")
	default:
		return DiskSource{}, 0, fieldErrorf(c.volumeField(vol, ""), "no volume source set")
	}
	src, ok := c.opts.Disks[vol.Name]
	if !ok {
		return DiskSource{Path: def, Format: format}, kind, nil
	}
	field := "Options.Disks[" + strconv.Quote(vol.Name) + "]"
	if !isAbs(src.Path) {
		return DiskSource{}, 0, fieldErrorf(field+".Path", "%q is not an absolute path", src.Path)
	}
	switch src.Format {
	case "":
		src.Format = format
	case "raw", "qcow2":
	default:
		return DiskSource{}, 0, fieldErrorf(field+".Format", "unknown image format %q (want raw or qcow2)", src.Format)
	}
	return src, kind, nil
}

// volumeField is the path of a field of vol in the VMI.
func (c *converter) volumeField(vol *v1.Volume, sub string) string {
	f := "spec.volumes[" + strconv.Itoa(c.volumeIndex(vol)) + "]"
	if sub != "" {
		f += "." + sub
	}
	return f
}

func (c *converter) volumeIndex(vol *v1.Volume) int {
	for j := range c.vmi.Spec.Volumes {
		if &c.vmi.Spec.Volumes[j] == vol {
			return j
		}
	}
	return -1
}

// ioPlan assigns I/O threads to virtio disks.
type ioPlan struct {
	// count is the number of I/O threads, numbered 1 to count.
	count uint
	// thread[i] is disk i's thread, 0 for none.
	thread []uint
}

func (p ioPlan) threadOf(i int) uint {
	if p.thread == nil {
		return 0
	}
	return p.thread[i]
}

// planIOThreads gives each virtio disk with dedicatedIOThread its own I/O
// thread and spreads the other virtio disks over a pool: one shared thread
// (ioThreadsPolicy shared, the default) or up to two per vCPU (auto), as
// KubeVirt does. Without a policy and dedicated threads, QEMU's main loop
// does the I/O.
func (c *converter) planIOThreads() (ioPlan, error) {
	disks := c.spec.Devices.Disks
	var shared, dedicated int
	for i := range disks {
		if !isVirtioDisk(&disks[i]) {
			continue
		}
		if enabled(disks[i].DedicatedIOThread, false) {
			dedicated++
		} else {
			shared++
		}
	}
	if shared+dedicated == 0 || dedicated == 0 && c.spec.IOThreadsPolicy == nil {
		return ioPlan{}, nil
	}
	pool := 0
	if shared > 0 {
		pool = 1
		if p := c.spec.IOThreadsPolicy; p != nil {
			switch *p {
			case v1.IOThreadsPolicyShared:
			case v1.IOThreadsPolicyAuto:
				pool = min(shared, 2*int(c.vcpus))
			default:
				return ioPlan{}, fieldErrorf("spec.domain.ioThreadsPolicy", "unknown policy %q (want shared or auto)", *p)
			}
		}
	}
	plan := ioPlan{count: uint(pool + dedicated), thread: make([]uint, len(disks))}
	nextShared, nextDedicated := 0, pool
	for i := range disks {
		if !isVirtioDisk(&disks[i]) {
			continue
		}
		if enabled(disks[i].DedicatedIOThread, false) {
			nextDedicated++
			plan.thread[i] = uint(nextDedicated)
		} else {
			plan.thread[i] = uint(nextShared%pool + 1)
			nextShared++
		}
	}
	return plan, nil
}

// isVirtioDisk reports whether d is a plain disk on the virtio bus.
func isVirtioDisk(d *v1.Disk) bool {
	if d.LUN != nil || d.CDRom != nil {
		return false
	}
	return d.Disk == nil || d.Disk.Bus == "" || d.Disk.Bus == v1.DiskBusVirtio
}

// targetName is the n-th (from 0) device name with prefix: vda … vdz, vdaa …
func targetName(prefix string, n int) string {
	var buf [8]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('a' + n%26)
		n = n/26 - 1
		if n < 0 {
			break
		}
	}
	return prefix + string(buf[i:])
}

// userAlias is the libvirt user alias of the device named name; the ua-
// prefix keeps it stable across libvirt's own renaming.
func userAlias(name string) string {
	return "ua-" + name
}

// isDeviceName reports whether a disk, interface or input name can go into
// a libvirt alias and a file name.
func isDeviceName(s string) bool {
	return isToken(s, 63, "_.-") && s != "." && s != ".."
}

func diskField(i int, sub string) string {
	f := "spec.domain.devices.disks[" + strconv.Itoa(i) + "]"
	if sub != "" {
		f += "." + sub
	}
	return f
}

func orBus(b, def v1.DiskBus) v1.DiskBus {
	if b == "" {
		return def
	}
	return b
}

func isAbs(p string) bool { return len(p) > 1 && p[0] == '/' }
