package domainxml

import (
	"errors"

	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml/internal/hyperv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// convertHyperv sets <hyperv> from spec.domain.features.hyperv or
// hypervPassthrough (hyperv.Convert), its errors *FieldError.
func (c *converter) convertHyperv(fl *libvirtxml.DomainFeatureList) error {
	hv, err := hyperv.Convert(c.spec.Features, c.spec.CPU, c.opts.arch.name, c.opts.Emulation)
	if fe := (*hyperv.FieldError)(nil); errors.As(err, &fe) {
		return fieldErrorf(fe.Field, "%s", fe.Message)
	} else if err != nil {
		return err
	}
	if hv != nil {
		fl.HyperV = hv
	}
	return nil
}

// hypervTimer is the hypervclock timer of spec.domain.clock.timer.hyperv
// (Hyper-V's reference time counter, hv-time).
func hypervTimer(t *v1.HypervTimer) libvirtxml.DomainTimer {
	return libvirtxml.DomainTimer{Name: "hypervclock", Present: yesNo(enabled(t.Enabled, true))}
}
