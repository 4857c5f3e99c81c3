package launcher

import (
	"context"
	"fmt"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// chooseAcceleration sets opts.Emulation from the hypervisor's domain
// capabilities: KVM where it reports KVM usable for the guest's
// architecture, else TCG when Config.Emulation allows it.
func (l *Launcher) chooseAcceleration(ctx context.Context, vmi *v1.VirtualMachineInstance, opts *domainxml.Options) error {
	arch, err := domainxml.LibvirtArch(vmi, opts)
	if err != nil {
		return err
	}
	if l.cfg.ForceEmulation {
		opts.Emulation = true
		return nil
	}
	kvm, err := l.h.KVMSupported(ctx, arch)
	if err != nil {
		return fmt.Errorf("asking the hypervisor whether KVM runs %s guests: %w", arch, err)
	}
	switch {
	case kvm:
		opts.Emulation = false
	case l.cfg.Emulation:
		opts.Emulation = true
	default:
		return fmt.Errorf("this node cannot run %s guests with KVM (the hypervisor's domain capabilities offer no domain type kvm: no usable /dev/kvm) "+
			"and software emulation is off (KubeVirt CR spec.configuration.developerConfiguration.useEmulation, virt-launcher --use-emulation)", arch)
	}
	return nil
}
