package fake

import (
	"context"
	"fmt"

	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// SetStats sets what Stats returns for the named domain while it is
// active, as the guest's activity would make libvirt count it. Without
// it, Stats reports the domain's memory and one running vCPU per vCPU of
// its definition, with nothing counted yet.
func (f *Hypervisor) SetStats(name string, st hypervisor.DomainStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[name] = st
}

// Stats implements Hypervisor with what SetStats set.
func (f *Hypervisor) Stats(ctx context.Context, name string) (hypervisor.DomainStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "Stats", name); err != nil {
		return hypervisor.DomainStats{}, err
	}
	d, err := f.lookup("stats", name)
	if err != nil {
		return hypervisor.DomainStats{}, err
	}
	if d.state.State == hypervisor.StateShutoff {
		return hypervisor.DomainStats{}, fmt.Errorf("stats %s: domain is shut off: %w", name, hypervisor.ErrInvalidState)
	}
	if st, ok := f.stats[name]; ok {
		return st, nil
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(d.xml); err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("stats %s: %w", name, err)
	}
	var st hypervisor.DomainStats
	if dom.Memory != nil {
		b := hypervisor.SizeBytes(dom.Memory.Value, dom.Memory.Unit)
		st.Memory.DomainBytes = &b
	}
	if dom.VCPU != nil {
		for i := range int(dom.VCPU.Value) {
			st.VCPUs = append(st.VCPUs, hypervisor.VCPUStats{ID: i, State: hypervisor.VCPURunning})
		}
	}
	return st, nil
}
