package domainxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"libvirt.org/go/libvirtxml"
)

// Marshal returns dom as libvirt domain XML, byte for byte what
// libvirtxml's (*Domain).Marshal returns, several times faster.
//
// The fast path writes the elements Convert produces directly. A domain
// that uses any other field of libvirtxml.Domain (a caller may add devices
// or tuning Convert does not know) is marshalled by encoding/xml through
// libvirtxml instead, so Marshal is correct for every domain and fast for
// converted ones.
func Marshal(dom *libvirtxml.Domain) (string, error) {
	if dom == nil {
		return "", errors.New("domainxml: nil domain")
	}
	if !fastDomain(dom) {
		return slowMarshal(dom)
	}
	e := &encoder{buf: make([]byte, estimateSize(dom))}
	e.domain(dom)
	// e.buf is never written again: share it rather than copy it, as
	// strings.Builder does.
	return unsafe.String(&e.buf[0], e.n), nil
}

// estimateSize guesses the length of a converted domain's XML from a fixed
// amount of markup per element and the lengths of its longest strings; a
// low guess costs one copy, a high one a little memory.
func estimateSize(d *libvirtxml.Domain) int {
	n := 1280 + 448*len(d.Devices.Disks) + 384*len(d.Devices.Interfaces) + 128*len(d.Devices.Channels)
	if d.Metadata != nil {
		n += len(d.Metadata.XML)
	}
	for i := range d.Devices.Disks {
		if src := d.Devices.Disks[i].Source; src != nil && src.File != nil {
			n += len(src.File.File)
		}
	}
	if o := d.OS; o != nil {
		n += len(o.Kernel) + len(o.Initrd) + len(o.Cmdline)
		if o.Loader != nil {
			n += 112 + len(o.Loader.Path)
		}
		if o.NVRam != nil {
			n += 48 + len(o.NVRam.NVRam) + len(o.NVRam.Template)
		}
	}
	for i := range d.Devices.Serials {
		if s := d.Devices.Serials[i]; s.Source != nil && s.Source.UNIX != nil {
			n += len(s.Source.UNIX.Path)
		}
	}
	if d.CPUTune != nil {
		n += 64 + 48*len(d.CPUTune.VCPUPin)
	}
	if d.CPU != nil {
		n += 56 * len(d.CPU.Features)
	}
	if d.Clock != nil {
		n += 72 * len(d.Clock.Timer)
	}
	return n
}

// slowMarshal is libvirtxml's own marshalling.
func slowMarshal(dom *libvirtxml.Domain) (string, error) {
	out, err := xml.MarshalIndent(dom, "", "  ")
	if err != nil {
		return "", fmt.Errorf("domainxml: marshal domain %q: %w", dom.Name, err)
	}
	return string(out), nil
}

// The fast* functions report whether a value sets only the fields the
// encoder writes. Each clears the fields it knows in a copy and asks
// reflection whether anything is left, so a field added to libvirtxml later
// sends a domain that sets it down the slow path instead of being dropped.

func fastDomain(d *libvirtxml.Domain) bool {
	c := *d
	c.XMLName, c.Type, c.Name, c.UUID, c.Metadata = xml.Name{}, "", "", "", nil
	c.Memory, c.MemoryBacking, c.VCPU, c.IOThreads, c.CPUTune = nil, nil, nil, 0, nil
	c.SysInfo, c.OS, c.Features, c.CPU, c.Clock = nil, nil, nil, nil, nil
	c.OnPoweroff, c.OnReboot, c.OnCrash, c.Devices = "", "", "", nil
	if !isZero(&c) || d.Devices == nil {
		return false
	}
	if d.MemoryBacking != nil && !fastMemoryBacking(d.MemoryBacking) {
		return false
	}
	if d.CPUTune != nil && !fastCPUTune(d.CPUTune) {
		return false
	}
	for i := range d.SysInfo {
		if !fastSysInfo(&d.SysInfo[i]) {
			return false
		}
	}
	if d.OS != nil && !fastOS(d.OS) {
		return false
	}
	if d.Features != nil && !fastFeatures(d.Features) {
		return false
	}
	if d.CPU != nil && !fastCPU(d.CPU) {
		return false
	}
	if d.Clock != nil && !fastClock(d.Clock) {
		return false
	}
	return fastDevices(d.Devices)
}

func fastMemoryBacking(m *libvirtxml.DomainMemoryBacking) bool {
	c := *m
	c.MemoryHugePages = nil
	return isZero(&c)
}

func fastCPUTune(t *libvirtxml.DomainCPUTune) bool {
	c := *t
	c.VCPUPin, c.EmulatorPin = nil, nil
	return isZero(&c)
}

func fastSysInfo(s *libvirtxml.DomainSysInfo) bool {
	if s.FWCfg != nil || s.SMBIOS == nil {
		return false
	}
	c := *s.SMBIOS
	c.System = nil
	if !isZero(&c) {
		return false
	}
	if sys := s.SMBIOS.System; sys != nil {
		for i := range sys.Entry {
			if sys.Entry[i].File != "" {
				return false
			}
		}
	}
	return true
}

func fastOS(o *libvirtxml.DomainOS) bool {
	c := *o
	c.Type, c.Loader, c.NVRam, c.Kernel, c.Initrd, c.Cmdline, c.BIOS, c.SMBios = nil, nil, nil, "", "", "", nil, nil
	if !isZero(&c) {
		return false
	}
	if o.Loader != nil && (o.Loader.Stateless != "" || o.Loader.Format != "") {
		return false
	}
	if n := o.NVRam; n != nil && (n.Source != nil || n.Format != "" || n.TemplateFormat != "") {
		return false
	}
	return o.BIOS == nil || o.BIOS.RebootTimeout == nil
}

func fastFeatures(f *libvirtxml.DomainFeatureList) bool {
	c := *f
	c.ACPI, c.APIC, c.KVM, c.PVSpinlock, c.SMM = nil, nil, nil, nil, nil
	if !isZero(&c) {
		return false
	}
	if k := f.KVM; k != nil && (k.HintDedicated != nil || k.PollControl != nil || k.PVIPI != nil || k.DirtyRing != nil) {
		return false
	}
	return f.SMM == nil || f.SMM.TSeg == nil
}

func fastCPU(cpu *libvirtxml.DomainCPU) bool {
	c := *cpu
	c.XMLName, c.Match, c.Mode, c.Model, c.Topology, c.Features = xml.Name{}, "", "", nil, nil, nil
	if !isZero(&c) {
		return false
	}
	if m := cpu.Model; m != nil && (m.Fallback != "" || m.VendorID != "") {
		return false
	}
	return cpu.Topology == nil || (cpu.Topology.Dies == 0 && cpu.Topology.Clusters == 0)
}

func fastClock(clk *libvirtxml.DomainClock) bool {
	if clk.Basis != "" || clk.Start != 0 {
		return false
	}
	for i := range clk.Timer {
		t := &clk.Timer[i]
		if t.CatchUp != nil || t.Frequency != 0 || t.Mode != "" {
			return false
		}
	}
	return true
}

func fastDevices(d *libvirtxml.DomainDeviceList) bool {
	c := *d
	c.Disks, c.Controllers, c.Interfaces, c.Serials, c.Consoles, c.Channels = nil, nil, nil, nil, nil, nil
	c.Inputs, c.Graphics, c.Videos, c.Watchdogs, c.MemBalloon, c.RNGs = nil, nil, nil, nil, nil, nil
	if !isZero(&c) {
		return false
	}
	for i := range d.Disks {
		if !fastDisk(&d.Disks[i]) {
			return false
		}
	}
	for i := range d.Controllers {
		if !fastController(&d.Controllers[i]) {
			return false
		}
	}
	for i := range d.Interfaces {
		if !fastInterface(&d.Interfaces[i]) {
			return false
		}
	}
	for i := range d.Serials {
		if !fastSerial(&d.Serials[i]) {
			return false
		}
	}
	for i := range d.Consoles {
		if !fastConsole(&d.Consoles[i]) {
			return false
		}
	}
	for i := range d.Channels {
		if !fastChannel(&d.Channels[i]) {
			return false
		}
	}
	for i := range d.Inputs {
		in := d.Inputs[i]
		in.XMLName, in.Type, in.Bus, in.Model, in.Alias = xml.Name{}, "", "", "", nil
		if !isZero(&in) {
			return false
		}
	}
	for i := range d.Graphics {
		if !fastGraphic(&d.Graphics[i]) {
			return false
		}
	}
	for i := range d.Videos {
		v := d.Videos[i]
		v.XMLName, v.Alias, v.Model.Type, v.Model.Heads, v.Model.VRam = xml.Name{}, nil, "", 0, 0
		if !isZero(&v) {
			return false
		}
	}
	for i := range d.Watchdogs {
		w := d.Watchdogs[i]
		w.XMLName, w.Model, w.Action, w.Alias = xml.Name{}, "", "", nil
		if !isZero(&w) {
			return false
		}
	}
	if b := d.MemBalloon; b != nil {
		c := *b
		c.XMLName, c.Model, c.Stats, c.Alias = xml.Name{}, "", nil, nil
		if !isZero(&c) {
			return false
		}
	}
	for i := range d.RNGs {
		r := d.RNGs[i]
		if r.Backend != nil && (r.Backend.Random == nil || r.Backend.EGD != nil || r.Backend.BuiltIn != nil) {
			return false
		}
		r.XMLName, r.Model, r.Backend, r.Alias = xml.Name{}, "", nil, nil
		if !isZero(&r) {
			return false
		}
	}
	return true
}

func fastDisk(d *libvirtxml.DomainDisk) bool {
	c := *d
	c.XMLName, c.Device, c.Model, c.Driver, c.Source, c.Target = xml.Name{}, "", "", nil, nil, nil
	c.ReadOnly, c.Shareable, c.Serial, c.Boot, c.Alias, c.Address = nil, nil, "", nil, nil, nil
	if !isZero(&c) {
		return false
	}
	if drv := d.Driver; drv != nil {
		c := *drv
		c.Name, c.Type, c.Cache, c.ErrorPolicy, c.IO, c.Discard, c.IOThread, c.Queues = "", "", "", "", "", "", nil, nil
		if !isZero(&c) {
			return false
		}
	}
	if s := d.Source; s != nil {
		// Exactly one of a file with a path and a block device with a path.
		c := *s
		c.File, c.Block = nil, nil
		if !isZero(&c) || (s.File == nil) == (s.Block == nil) {
			return false
		}
		if s.File != nil && (s.File.File == "" || s.File.FDGroup != "" || s.File.SecLabel != nil) {
			return false
		}
		if s.Block != nil && (s.Block.Dev == "" || s.Block.SecLabel != nil) {
			return false
		}
	}
	if t := d.Target; t != nil && (t.Removable != "" || t.RotationRate != 0 || t.DPOFUA != "") {
		return false
	}
	if d.Boot != nil && d.Boot.LoadParm != "" {
		return false
	}
	return fastAddress(d.Address)
}

func fastController(ctl *libvirtxml.DomainController) bool {
	c := *ctl
	c.XMLName, c.Type, c.Index, c.Model, c.Alias = xml.Name{}, "", nil, "", nil
	return isZero(&c)
}

func fastInterface(iface *libvirtxml.DomainInterface) bool {
	c := *iface
	c.XMLName, c.MAC, c.Source, c.Boot, c.Target, c.Model, c.Driver, c.ROM, c.Alias, c.Address = xml.Name{}, nil, nil, nil, nil, nil, nil, nil, nil, nil
	if !isZero(&c) {
		return false
	}
	if s := iface.Source; s != nil {
		c := *s
		c.Ethernet = nil
		if !isZero(&c) || s.Ethernet == nil || s.Ethernet.IP != nil || s.Ethernet.Route != nil {
			return false
		}
	}
	if m := iface.MAC; m != nil && (m.Type != "" || m.Check != "") {
		return false
	}
	if d := iface.Driver; d != nil {
		c := *d
		c.Queues = 0
		if !isZero(&c) {
			return false
		}
	}
	if r := iface.ROM; r != nil && (r.Bar != "" || r.File != nil) {
		return false
	}
	if iface.Boot != nil && iface.Boot.LoadParm != "" {
		return false
	}
	return fastAddress(iface.Address)
}

func fastAddress(a *libvirtxml.DomainAddress) bool {
	if a == nil {
		return true
	}
	c := *a
	c.PCI = nil
	return isZero(&c) && a.PCI != nil && a.PCI.MultiFunction == "" && a.PCI.ZPCI == nil
}

// fastChardevSource accepts a UNIX socket or a pty, whose only attributes
// are the mode and path.
func fastChardevSource(s *libvirtxml.DomainChardevSource) bool {
	if s == nil {
		return true
	}
	c := *s
	c.UNIX, c.Pty = nil, nil
	if !isZero(&c) || (s.UNIX == nil) == (s.Pty == nil) {
		return false
	}
	if u := s.UNIX; u != nil && (u.Reconnect != nil || u.SecLabel != nil) {
		return false
	}
	return s.Pty == nil || s.Pty.SecLabel == nil
}

func fastSerial(s *libvirtxml.DomainSerial) bool {
	c := *s
	c.XMLName, c.Source, c.Target, c.Log, c.Alias = xml.Name{}, nil, nil, nil, nil
	if !isZero(&c) || !fastChardevSource(s.Source) {
		return false
	}
	return s.Target == nil || (s.Target.Type == "" && s.Target.Model == nil)
}

func fastConsole(s *libvirtxml.DomainConsole) bool {
	c := *s
	c.XMLName, c.Source, c.Target, c.Alias = xml.Name{}, nil, nil, nil
	return isZero(&c) && fastChardevSource(s.Source)
}

// fastChannel accepts a virtio channel on a UNIX socket or a pty.
func fastChannel(ch *libvirtxml.DomainChannel) bool {
	c := *ch
	c.XMLName, c.Source, c.Target, c.Alias = xml.Name{}, nil, nil, nil
	if !isZero(&c) || !fastChardevSource(ch.Source) {
		return false
	}
	t := ch.Target
	return t == nil || (t.VirtIO != nil && t.Xen == nil && t.GuestFWD == nil)
}

func fastGraphic(g *libvirtxml.DomainGraphic) bool {
	if g.VNC == nil {
		return false
	}
	c := *g
	c.XMLName, c.VNC = xml.Name{}, nil
	if !isZero(&c) {
		return false
	}
	v := *g.VNC
	v.Listeners = nil
	if !isZero(&v) {
		return false
	}
	for _, l := range g.VNC.Listeners {
		if l.Socket == nil || l.Address != nil || l.Network != nil {
			return false
		}
	}
	return true
}

// isZero reports whether every byte of *v is zero, which for the
// libvirtxml types (strings, integers, pointers, slices; no floats) means
// every field is its zero value. A struct that is zero field by field but
// not byte by byte (an empty string with a non-nil pointer, say) counts as
// non-zero: that only sends a domain down the slow path, whose output is the
// same. Comparing words is an order of magnitude faster than
// reflect.Value.IsZero on these wide structs.
func isZero[T any](v *T) bool {
	size := unsafe.Sizeof(*v)
	p := unsafe.Pointer(v)
	var i uintptr
	for ; i+8 <= size; i += 8 {
		if *(*uint64)(unsafe.Add(p, i)) != 0 {
			return false
		}
	}
	for ; i < size; i++ {
		if *(*byte)(unsafe.Add(p, i)) != 0 {
			return false
		}
	}
	return true
}

// encoder writes XML exactly as encoding/xml's MarshalIndent(v, "", "  ")
// does: one element per line, an element holding only text (or nothing) on
// a single line, and the same escaping.
//
// It writes into buf by index instead of appending: storing bytes is not a
// pointer write, so the garbage collector's write barrier stays out of the
// way; only growing buf stores a pointer.
type encoder struct {
	buf        []byte // len(buf) == cap(buf); buf[:n] is the output
	n          int
	depth      int
	indentedIn bool
	putNewline bool
}

// reserve makes room for k more bytes.
func (e *encoder) reserve(k int) {
	if e.n+k <= len(e.buf) {
		return
	}
	b := make([]byte, max(2*len(e.buf), e.n+k))
	copy(b, e.buf[:e.n])
	e.buf = b
}

func (e *encoder) str(s string) {
	e.reserve(len(s))
	e.n += copy(e.buf[e.n:], s)
}

func (e *encoder) bytes(s []byte) {
	e.reserve(len(s))
	e.n += copy(e.buf[e.n:], s)
}

func (e *encoder) byte1(c byte) {
	e.reserve(1)
	e.buf[e.n] = c
	e.n++
}

// indent mirrors encoding/xml's printer.writeIndent.
func (e *encoder) indent(delta int) {
	if delta < 0 {
		e.depth--
		if e.indentedIn {
			e.indentedIn = false
			return
		}
		e.indentedIn = false
	}
	if e.putNewline {
		e.byte1('\n')
	} else {
		e.putNewline = true
	}
	const spaces = "                                                                "
	for d := 2 * e.depth; d > 0; d -= len(spaces) {
		e.str(spaces[:min(d, len(spaces))])
	}
	if delta > 0 {
		e.depth++
		e.indentedIn = true
	}
}

// The element and attribute writers take their markup ready-made from the
// caller's constants ("<disk", "</disk>", ` type="`), so each is one copy.

// open writes the start of a start tag, "<name"; attributes and openEnd
// follow.
func (e *encoder) open(tag string) {
	e.indent(1)
	e.str(tag)
}

func (e *encoder) openEnd() { e.byte1('>') }

// close writes an end tag, "</name>".
func (e *encoder) close(tag string) {
	e.indent(-1)
	e.str(tag)
}

// closeEmpty ends an element without content right after its attributes:
// tag is "></name>". Like encoding/xml, it writes no newline before the
// end tag of an element that has no children.
func (e *encoder) closeEmpty(tag string) {
	e.depth--
	e.indentedIn = false
	e.str(tag)
}

// attr writes an attribute; prefix is ` name="`.
func (e *encoder) attr(prefix, value string) {
	e.str(prefix)
	e.escape(value)
	e.byte1('"')
}

func (e *encoder) attrOpt(prefix, value string) {
	if value != "" {
		e.attr(prefix, value)
	}
}

func (e *encoder) attrUint(prefix string, v uint) {
	e.str(prefix)
	e.uintChars(v)
	e.byte1('"')
}

func (e *encoder) attrUintOpt(prefix string, v uint) {
	if v != 0 {
		e.attrUint(prefix, v)
	}
}

func (e *encoder) attrIntOpt(prefix string, v int) {
	if v != 0 {
		e.str(prefix)
		var buf [20]byte
		e.bytes(strconv.AppendInt(buf[:0], int64(v), 10))
		e.byte1('"')
	}
}

// text writes an element holding only text: open is "<name>", close
// "</name>".
func (e *encoder) text(open, close, value string) {
	e.indent(1)
	e.str(open)
	e.escape(value)
	e.closeEmpty(close)
}

func (e *encoder) textOpt(open, close, value string) {
	if value != "" {
		e.text(open, close, value)
	}
}

func (e *encoder) uintText(open, close string, v uint) {
	e.indent(1)
	e.str(open)
	e.uintChars(v)
	e.closeEmpty(close)
}

func (e *encoder) domain(d *libvirtxml.Domain) {
	e.open("<domain")
	e.attrOpt(` type="`, d.Type)
	e.openEnd()
	e.textOpt("<name>", "</name>", d.Name)
	e.textOpt("<uuid>", "</uuid>", d.UUID)
	if m := d.Metadata; m != nil {
		e.open("<metadata")
		e.byte1('>')
		e.str(m.XML)
		e.close("</metadata>")
	}
	if m := d.Memory; m != nil {
		e.open("<memory")
		e.attrOpt(` unit="`, m.Unit)
		e.attrOpt(` dumpCore="`, m.DumpCore)
		e.byte1('>')
		e.uintChars(m.Value)
		e.close("</memory>")
	}
	if mb := d.MemoryBacking; mb != nil {
		e.open("<memoryBacking")
		e.openEnd()
		if hp := mb.MemoryHugePages; hp != nil {
			e.open("<hugepages")
			e.openEnd()
			for _, p := range hp.Hugepages {
				e.open("<page")
				e.attrUint(` size="`, p.Size)
				e.attrOpt(` unit="`, p.Unit)
				e.attrOpt(` nodeset="`, p.Nodeset)
				e.closeEmpty("></page>")
			}
			e.close("</hugepages>")
		}
		e.close("</memoryBacking>")
	}
	if v := d.VCPU; v != nil {
		e.open("<vcpu")
		e.attrOpt(` placement="`, v.Placement)
		e.attrOpt(` cpuset="`, v.CPUSet)
		e.attrUintOpt(` current="`, v.Current)
		e.byte1('>')
		e.uintChars(v.Value)
		e.close("</vcpu>")
	}
	if d.IOThreads != 0 {
		e.uintText("<iothreads>", "</iothreads>", d.IOThreads)
	}
	if t := d.CPUTune; t != nil {
		e.open("<cputune")
		e.openEnd()
		for _, p := range t.VCPUPin {
			e.open("<vcpupin")
			e.attrUint(` vcpu="`, p.VCPU)
			e.attr(` cpuset="`, p.CPUSet)
			e.closeEmpty("></vcpupin>")
		}
		if p := t.EmulatorPin; p != nil {
			e.open("<emulatorpin")
			e.attr(` cpuset="`, p.CPUSet)
			e.closeEmpty("></emulatorpin>")
		}
		e.close("</cputune>")
	}
	for i := range d.SysInfo {
		e.sysInfo(d.SysInfo[i].SMBIOS)
	}
	if d.OS != nil {
		e.os(d.OS)
	}
	if d.Features != nil {
		e.features(d.Features)
	}
	if d.CPU != nil {
		e.cpu(d.CPU)
	}
	if d.Clock != nil {
		e.clock(d.Clock)
	}
	e.textOpt("<on_poweroff>", "</on_poweroff>", d.OnPoweroff)
	e.textOpt("<on_reboot>", "</on_reboot>", d.OnReboot)
	e.textOpt("<on_crash>", "</on_crash>", d.OnCrash)
	e.devices(d.Devices)
	e.close("</domain>")
}

func (e *encoder) uintChars(v uint) {
	var buf [20]byte
	e.bytes(strconv.AppendUint(buf[:0], uint64(v), 10))
}

func (e *encoder) sysInfo(s *libvirtxml.DomainSysInfoSMBIOS) {
	e.open("<sysinfo")
	e.attr(` type="`, "smbios")
	e.openEnd()
	if sys := s.System; sys != nil {
		e.open("<system")
		e.openEnd()
		for _, en := range sys.Entry {
			e.open("<entry")
			e.attr(` name="`, en.Name)
			e.byte1('>')
			e.escape(en.Value)
			e.close("</entry>")
		}
		e.close("</system>")
	}
	e.close("</sysinfo>")
}

func (e *encoder) os(o *libvirtxml.DomainOS) {
	e.open("<os")
	e.openEnd()
	if t := o.Type; t != nil {
		e.open("<type")
		e.attrOpt(` arch="`, t.Arch)
		e.attrOpt(` machine="`, t.Machine)
		e.byte1('>')
		e.escape(t.Type)
		e.close("</type>")
	}
	if l := o.Loader; l != nil {
		e.open("<loader")
		e.attrOpt(` readonly="`, l.Readonly)
		e.attrOpt(` secure="`, l.Secure)
		e.attrOpt(` type="`, l.Type)
		e.byte1('>')
		e.escape(l.Path)
		e.close("</loader>")
	}
	if n := o.NVRam; n != nil {
		e.open("<nvram")
		e.attrOpt(` template="`, n.Template)
		e.byte1('>')
		e.escape(n.NVRam)
		e.close("</nvram>")
	}
	e.textOpt("<kernel>", "</kernel>", o.Kernel)
	e.textOpt("<initrd>", "</initrd>", o.Initrd)
	e.textOpt("<cmdline>", "</cmdline>", o.Cmdline)
	if b := o.BIOS; b != nil {
		e.open("<bios")
		e.attrOpt(` useserial="`, b.UseSerial)
		e.closeEmpty("></bios>")
	}
	if s := o.SMBios; s != nil {
		e.open("<smbios")
		e.attr(` mode="`, s.Mode)
		e.closeEmpty("></smbios>")
	}
	e.close("</os>")
}

func (e *encoder) features(f *libvirtxml.DomainFeatureList) {
	e.open("<features")
	e.openEnd()
	if f.ACPI != nil {
		e.open("<acpi")
		e.closeEmpty("></acpi>")
	}
	if a := f.APIC; a != nil {
		e.open("<apic")
		e.attrOpt(` eoi="`, a.EOI)
		e.closeEmpty("></apic>")
	}
	if k := f.KVM; k != nil {
		e.open("<kvm")
		e.openEnd()
		if h := k.Hidden; h != nil {
			e.open("<hidden")
			e.attrOpt(` state="`, h.State)
			e.closeEmpty("></hidden>")
		}
		e.close("</kvm>")
	}
	if p := f.PVSpinlock; p != nil {
		e.open("<pvspinlock")
		e.attrOpt(` state="`, p.State)
		e.closeEmpty("></pvspinlock>")
	}
	if s := f.SMM; s != nil {
		e.open("<smm")
		e.attrOpt(` state="`, s.State)
		e.closeEmpty("></smm>")
	}
	e.close("</features>")
}

func (e *encoder) cpu(c *libvirtxml.DomainCPU) {
	e.open("<cpu")
	e.attrOpt(` match="`, c.Match)
	e.attrOpt(` mode="`, c.Mode)
	e.openEnd()
	if m := c.Model; m != nil {
		e.open("<model")
		e.byte1('>')
		e.escape(m.Value)
		e.close("</model>")
	}
	if t := c.Topology; t != nil {
		e.open("<topology")
		e.attrIntOpt(` sockets="`, t.Sockets)
		e.attrIntOpt(` cores="`, t.Cores)
		e.attrIntOpt(` threads="`, t.Threads)
		e.closeEmpty("></topology>")
	}
	for _, f := range c.Features {
		e.open("<feature")
		e.attrOpt(` policy="`, f.Policy)
		e.attrOpt(` name="`, f.Name)
		e.closeEmpty("></feature>")
	}
	e.close("</cpu>")
}

func (e *encoder) clock(c *libvirtxml.DomainClock) {
	e.open("<clock")
	e.attrOpt(` offset="`, c.Offset)
	e.attrOpt(` adjustment="`, c.Adjustment)
	e.attrOpt(` timezone="`, c.TimeZone)
	e.openEnd()
	for _, t := range c.Timer {
		e.open("<timer")
		e.attr(` name="`, t.Name)
		e.attrOpt(` track="`, t.Track)
		e.attrOpt(` tickpolicy="`, t.TickPolicy)
		e.attrOpt(` present="`, t.Present)
		e.closeEmpty("></timer>")
	}
	e.close("</clock>")
}

func (e *encoder) devices(d *libvirtxml.DomainDeviceList) {
	e.open("<devices")
	e.openEnd()
	for i := range d.Disks {
		e.disk(&d.Disks[i])
	}
	for i := range d.Controllers {
		c := &d.Controllers[i]
		e.open("<controller")
		e.attr(` type="`, c.Type)
		if c.Index != nil {
			e.attrUint(` index="`, *c.Index)
		}
		e.attrOpt(` model="`, c.Model)
		e.openEnd()
		e.alias(c.Alias)
		e.close("</controller>")
	}
	for i := range d.Interfaces {
		e.iface(&d.Interfaces[i])
	}
	for i := range d.Serials {
		s := &d.Serials[i]
		e.open("<serial")
		e.chardevType(s.Source)
		e.openEnd()
		e.chardevSource(s.Source)
		if t := s.Target; t != nil {
			e.open("<target")
			if t.Port != nil {
				e.attrUint(` port="`, *t.Port)
			}
			e.closeEmpty("></target>")
		}
		if l := s.Log; l != nil {
			e.open("<log")
			e.attr(` file="`, l.File)
			e.attrOpt(` append="`, l.Append)
			e.closeEmpty("></log>")
		}
		e.alias(s.Alias)
		e.close("</serial>")
	}
	for i := range d.Consoles {
		c := &d.Consoles[i]
		e.open("<console")
		e.chardevType(c.Source)
		e.openEnd()
		e.chardevSource(c.Source)
		if t := c.Target; t != nil {
			e.open("<target")
			e.attrOpt(` type="`, t.Type)
			if t.Port != nil {
				e.attrUint(` port="`, *t.Port)
			}
			e.closeEmpty("></target>")
		}
		e.alias(c.Alias)
		e.close("</console>")
	}
	for i := range d.Channels {
		c := &d.Channels[i]
		e.open("<channel")
		e.chardevType(c.Source)
		e.openEnd()
		e.chardevSource(c.Source)
		if t := c.Target; t != nil {
			e.open("<target")
			e.attr(` type="`, "virtio")
			e.attrOpt(` name="`, t.VirtIO.Name)
			e.attrOpt(` state="`, t.VirtIO.State)
			e.closeEmpty("></target>")
		}
		e.alias(c.Alias)
		e.close("</channel>")
	}
	for i := range d.Inputs {
		in := &d.Inputs[i]
		e.open("<input")
		e.attr(` type="`, in.Type)
		e.attrOpt(` bus="`, in.Bus)
		e.attrOpt(` model="`, in.Model)
		e.openEnd()
		e.alias(in.Alias)
		e.close("</input>")
	}
	for i := range d.Graphics {
		v := d.Graphics[i].VNC
		e.open("<graphics")
		e.attr(` type="`, "vnc")
		e.openEnd()
		for _, l := range v.Listeners {
			e.open("<listen")
			e.attr(` type="`, "socket")
			e.attrOpt(` socket="`, l.Socket.Socket)
			e.closeEmpty("></listen>")
		}
		e.close("</graphics>")
	}
	for i := range d.Videos {
		v := &d.Videos[i]
		e.open("<video")
		e.openEnd()
		e.open("<model")
		e.attrOpt(` type="`, v.Model.Type)
		e.attrUintOpt(` heads="`, v.Model.Heads)
		e.attrUintOpt(` vram="`, v.Model.VRam)
		e.closeEmpty("></model>")
		e.alias(v.Alias)
		e.close("</video>")
	}
	for i := range d.Watchdogs {
		w := &d.Watchdogs[i]
		e.open("<watchdog")
		e.attr(` model="`, w.Model)
		e.attrOpt(` action="`, w.Action)
		e.openEnd()
		e.alias(w.Alias)
		e.close("</watchdog>")
	}
	if b := d.MemBalloon; b != nil {
		e.open("<memballoon")
		e.attr(` model="`, b.Model)
		e.openEnd()
		if s := b.Stats; s != nil {
			e.open("<stats")
			e.attrUint(` period="`, s.Period)
			e.closeEmpty("></stats>")
		}
		e.alias(b.Alias)
		e.close("</memballoon>")
	}
	for i := range d.RNGs {
		r := &d.RNGs[i]
		e.open("<rng")
		e.attr(` model="`, r.Model)
		e.openEnd()
		if r.Backend != nil {
			e.open("<backend")
			e.attr(` model="`, "random")
			e.byte1('>')
			e.escape(r.Backend.Random.Device)
			e.close("</backend>")
		}
		e.alias(r.Alias)
		e.close("</rng>")
	}
	e.close("</devices>")
}

func (e *encoder) disk(d *libvirtxml.DomainDisk) {
	e.open("<disk")
	if s := d.Source; s != nil {
		if s.File != nil {
			e.attr(` type="`, "file")
		} else {
			e.attr(` type="`, "block")
		}
	}
	e.attrOpt(` device="`, d.Device)
	e.attrOpt(` model="`, d.Model)
	e.openEnd()
	if drv := d.Driver; drv != nil {
		e.open("<driver")
		e.attrOpt(` name="`, drv.Name)
		e.attrOpt(` type="`, drv.Type)
		e.attrOpt(` cache="`, drv.Cache)
		e.attrOpt(` error_policy="`, drv.ErrorPolicy)
		e.attrOpt(` io="`, drv.IO)
		e.attrOpt(` discard="`, drv.Discard)
		if drv.IOThread != nil {
			e.attrUint(` iothread="`, *drv.IOThread)
		}
		if drv.Queues != nil {
			e.attrUint(` queues="`, *drv.Queues)
		}
		e.closeEmpty("></driver>")
	}
	if s := d.Source; s != nil {
		e.open("<source")
		if s.File != nil {
			e.attrOpt(` file="`, s.File.File)
		} else {
			e.attrOpt(` dev="`, s.Block.Dev)
		}
		e.closeEmpty("></source>")
	}
	if t := d.Target; t != nil {
		e.open("<target")
		e.attrOpt(` dev="`, t.Dev)
		e.attrOpt(` bus="`, t.Bus)
		e.attrOpt(` tray="`, t.Tray)
		e.closeEmpty("></target>")
	}
	if d.ReadOnly != nil {
		e.open("<readonly")
		e.closeEmpty("></readonly>")
	}
	if d.Shareable != nil {
		e.open("<shareable")
		e.closeEmpty("></shareable>")
	}
	e.textOpt("<serial>", "</serial>", d.Serial)
	e.boot(d.Boot)
	e.alias(d.Alias)
	e.address(d.Address)
	e.close("</disk>")
}

func (e *encoder) iface(i *libvirtxml.DomainInterface) {
	e.open("<interface")
	if i.Source != nil {
		e.attr(` type="`, "ethernet")
	}
	e.openEnd()
	if m := i.MAC; m != nil {
		e.open("<mac")
		e.attr(` address="`, m.Address)
		e.closeEmpty("></mac>")
	}
	e.boot(i.Boot)
	if t := i.Target; t != nil {
		e.open("<target")
		e.attr(` dev="`, t.Dev)
		e.attrOpt(` managed="`, t.Managed)
		e.closeEmpty("></target>")
	}
	if m := i.Model; m != nil {
		e.open("<model")
		e.attr(` type="`, m.Type)
		e.closeEmpty("></model>")
	}
	if d := i.Driver; d != nil {
		e.open("<driver")
		e.attrUintOpt(` queues="`, d.Queues)
		e.closeEmpty("></driver>")
	}
	if r := i.ROM; r != nil {
		e.open("<rom")
		e.attrOpt(` enabled="`, r.Enabled)
		e.closeEmpty("></rom>")
	}
	e.alias(i.Alias)
	e.address(i.Address)
	e.close("</interface>")
}

func (e *encoder) chardevType(s *libvirtxml.DomainChardevSource) {
	switch {
	case s == nil:
	case s.UNIX != nil:
		e.attr(` type="`, "unix")
	case s.Pty != nil:
		e.attr(` type="`, "pty")
	}
}

func (e *encoder) chardevSource(s *libvirtxml.DomainChardevSource) {
	switch {
	case s == nil:
	case s.UNIX != nil:
		if s.UNIX.Mode == "" && s.UNIX.Path == "" {
			return
		}
		e.open("<source")
		e.attrOpt(` mode="`, s.UNIX.Mode)
		e.attrOpt(` path="`, s.UNIX.Path)
		e.closeEmpty("></source>")
	case s.Pty != nil:
		if s.Pty.Path == "" {
			return
		}
		e.open("<source")
		e.attr(` path="`, s.Pty.Path)
		e.closeEmpty("></source>")
	}
}

func (e *encoder) boot(b *libvirtxml.DomainDeviceBoot) {
	if b != nil {
		e.open("<boot")
		e.attrUint(` order="`, b.Order)
		e.closeEmpty("></boot>")
	}
}

func (e *encoder) alias(a *libvirtxml.DomainAlias) {
	if a != nil {
		e.open("<alias")
		e.attr(` name="`, a.Name)
		e.closeEmpty("></alias>")
	}
}

func (e *encoder) address(a *libvirtxml.DomainAddress) {
	if a == nil {
		return
	}
	p := a.PCI
	e.open("<address")
	e.attr(` type="`, "pci")
	e.hexAttr(` domain="`, p.Domain, 4)
	e.hexAttr(` bus="`, p.Bus, 2)
	e.hexAttr(` slot="`, p.Slot, 2)
	e.hexAttr(` function="`, p.Function, 1)
	e.closeEmpty("></address>")
}

// hexAttr writes a 0x-prefixed hexadecimal attribute zero-padded to width
// digits, like libvirtxml's PCI addresses.
func (e *encoder) hexAttr(prefix string, v *uint, width int) {
	if v == nil {
		return
	}
	var buf [24]byte
	digits := strconv.AppendUint(buf[:0], uint64(*v), 16)
	e.str(prefix)
	e.str("0x")
	for i := len(digits); i < width; i++ {
		e.byte1('0')
	}
	e.bytes(digits)
	e.byte1('"')
}

// needsEscape[c] is 1 for the bytes escape must look at: control
// characters, the XML specials and the start of every multi-byte UTF-8
// sequence (which may be invalid or a character XML cannot hold).
const needsEscape = "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x00\x00\x01\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"

// escape writes s with encoding/xml's escaping; see appendEscaped.
func (e *encoder) escape(s string) {
	e.reserve(len(s))
	for i := 0; i < len(s); i++ {
		if needsEscape[s[i]] != 0 {
			e.buf = appendEscaped(e.buf[:e.n], s)
			e.n = len(e.buf)
			e.buf = e.buf[:cap(e.buf)]
			return
		}
	}
	e.n += copy(e.buf[e.n:], s)
}

// appendEscaped appends s with encoding/xml's escaping: the five XML
// specials, tab, newline and carriage return as character references, and
// U+FFFD for invalid UTF-8 and characters XML cannot hold.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if needsEscape[c] == 0 {
			i++
			continue
		}
		r, width := rune(c), 1
		if c >= utf8.RuneSelf {
			r, width = utf8.DecodeRuneInString(s[i:])
		}
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !isInCharacterRange(r) || (r == utf8.RuneError && width == 1) {
				esc = "\uFFFD"
				break
			}
			i += width
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, esc...)
		i += width
		last = i
	}
	return append(b, s[last:]...)
}

func isInCharacterRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
