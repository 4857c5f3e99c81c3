package libvirt

import (
	"context"
	"fmt"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// statsTypes are the groups of statistics Stats asks libvirt for.
const statsTypes = golibvirt.DOMAIN_STATS_CPU_TOTAL | golibvirt.DOMAIN_STATS_BALLOON | golibvirt.DOMAIN_STATS_VCPU |
	golibvirt.DOMAIN_STATS_INTERFACE | golibvirt.DOMAIN_STATS_BLOCK

// Stats implements hypervisor.Hypervisor with virDomainListGetStats (the
// per-domain form of virConnectGetAllDomainStats, which KubeVirt's
// launcher calls) and the live domain XML, which names the VMI's disk and
// interface of each device by its user alias.
func (h *Hypervisor) Stats(ctx context.Context, name string) (hypervisor.DomainStats, error) {
	var out hypervisor.DomainStats
	err := h.call(ctx, "stats", name, func(c *golibvirt.Connect) error {
		dom, err := c.LookupDomainByName(name)
		if err != nil {
			return err
		}
		defer dom.Free()
		if err := requireState(dom, "read the statistics of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED,
			golibvirt.DOMAIN_PAUSED, golibvirt.DOMAIN_SHUTDOWN, golibvirt.DOMAIN_PMSUSPENDED); err != nil {
			return err
		}
		all, err := c.GetAllDomainStats([]*golibvirt.Domain{dom}, statsTypes, 0)
		if err != nil {
			return err
		}
		defer func() {
			for i := range all {
				_ = all[i].Domain.Free()
			}
		}()
		if len(all) != 1 {
			return fmt.Errorf("libvirt returned the statistics of %d domains, want 1", len(all))
		}
		aliases := map[string]string{}
		if desc, err := dom.GetXMLDesc(0); err == nil {
			aliases = deviceAliases(desc)
		}
		out = convertStats(&all[0], aliases)
		return nil
	})
	return out, err
}

// deviceAliases maps the disks' target devices ("disk/vda") and the
// interfaces' host devices ("net/tap0") of a live domain XML to the names
// the VMI gave them (their user aliases).
func deviceAliases(desc string) map[string]string {
	out := map[string]string{}
	var d libvirtxml.Domain
	if err := d.Unmarshal(desc); err != nil || d.Devices == nil {
		return out
	}
	for _, disk := range d.Devices.Disks {
		if disk.Target != nil && disk.Alias != nil {
			out["disk/"+disk.Target.Dev] = hypervisor.DeviceName(disk.Alias.Name)
		}
	}
	for _, iface := range d.Devices.Interfaces {
		if iface.Target != nil && iface.Alias != nil {
			out["net/"+iface.Target.Dev] = hypervisor.DeviceName(iface.Alias.Name)
		}
	}
	return out
}

// convertStats converts libvirt's statistics record: balloon sizes from
// KiB to bytes, values libvirt did not set left nil.
func convertStats(st *golibvirt.DomainStats, aliases map[string]string) hypervisor.DomainStats {
	var out hypervisor.DomainStats
	if c := st.Cpu; c != nil {
		out.CPU = hypervisor.CPUStats{TimeNs: opt(c.TimeSet, c.Time), UserNs: opt(c.UserSet, c.User), SystemNs: opt(c.SystemSet, c.System)}
	}
	if b := st.Balloon; b != nil {
		kib := func(set bool, v uint64) *uint64 { return opt(set, v*1024) }
		out.Memory = hypervisor.MemoryStats{
			DomainBytes:        kib(b.MaximumSet, b.Maximum),
			ActualBalloonBytes: kib(b.CurrentSet, b.Current),
			ResidentBytes:      kib(b.RssSet, b.Rss),
			AvailableBytes:     kib(b.AvailableSet, b.Available),
			UsableBytes:        kib(b.UsableSet, b.Usable),
			UnusedBytes:        kib(b.UnusedSet, b.Unused),
			CachedBytes:        kib(b.DiskCachesSet, b.DiskCaches),
			SwapInBytes:        kib(b.SwapInSet, b.SwapIn),
			SwapOutBytes:       kib(b.SwapOutSet, b.SwapOut),
			MajorFaults:        opt(b.MajorFaultSet, b.MajorFault),
			MinorFaults:        opt(b.MinorFaultSet, b.MinorFault),
		}
	}
	for i, v := range st.Vcpu {
		state := hypervisor.VCPUUnknown
		if v.StateSet {
			switch v.State {
			case golibvirt.VCPU_OFFLINE:
				state = hypervisor.VCPUOffline
			case golibvirt.VCPU_RUNNING:
				state = hypervisor.VCPURunning
			case golibvirt.VCPU_BLOCKED:
				state = hypervisor.VCPUBlocked
			}
		}
		out.VCPUs = append(out.VCPUs, hypervisor.VCPUStats{ID: i, State: state,
			TimeNs: opt(v.TimeSet, v.Time), WaitNs: opt(v.WaitSet, v.Wait), DelayNs: opt(v.DelaySet, v.Delay)})
	}
	for _, n := range st.Net {
		if !n.NameSet {
			continue
		}
		out.Interfaces = append(out.Interfaces, hypervisor.InterfaceStats{
			Name: n.Name, Alias: aliases["net/"+n.Name],
			RxBytes: opt(n.RxBytesSet, n.RxBytes), RxPackets: opt(n.RxPktsSet, n.RxPkts),
			RxErrors: opt(n.RxErrsSet, n.RxErrs), RxDrops: opt(n.RxDropSet, n.RxDrop),
			TxBytes: opt(n.TxBytesSet, n.TxBytes), TxPackets: opt(n.TxPktsSet, n.TxPkts),
			TxErrors: opt(n.TxErrsSet, n.TxErrs), TxDrops: opt(n.TxDropSet, n.TxDrop),
		})
	}
	for _, b := range st.Block {
		// One record per disk: backing images would come as further
		// records only with the flag STATS_BACKING, which Stats does not
		// pass.
		if !b.NameSet {
			continue
		}
		out.Disks = append(out.Disks, hypervisor.DiskStats{
			Name: b.Name, Alias: aliases["disk/"+b.Name],
			ReadRequests: opt(b.RdReqsSet, b.RdReqs), ReadBytes: opt(b.RdBytesSet, b.RdBytes), ReadTimeNs: opt(b.RdTimesSet, b.RdTimes),
			WriteRequests: opt(b.WrReqsSet, b.WrReqs), WriteBytes: opt(b.WrBytesSet, b.WrBytes), WriteTimeNs: opt(b.WrTimesSet, b.WrTimes),
			FlushRequests: opt(b.FlReqsSet, b.FlReqs), FlushTimeNs: opt(b.FlTimesSet, b.FlTimes),
		})
	}
	return out
}

// opt is v when libvirt set it, else nil.
func opt(set bool, v uint64) *uint64 {
	if !set {
		return nil
	}
	return &v
}
