package hypervisor

import "context"

// LinkSetter is implemented by hypervisors that can set the link of a NIC
// the domain's definition does not list: QEMU's own devices, such as the
// passtBinding's NIC, which libvirt 9.0 cannot manage (domainxml). Callers
// check for it with a type assertion.
type LinkSetter interface {
	// SetQEMULink sets the link of the running named domain's QEMU network
	// device (its QEMU id) up or down, as QEMU's set_link: the guest sees
	// its NIC's carrier go and come back. An unknown device fails.
	SetQEMULink(ctx context.Context, name, device string, up bool) error
}
