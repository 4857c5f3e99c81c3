package libvirt

import (
	"context"
	"encoding/json"
	"fmt"

	golibvirt "libvirt.org/go/libvirt"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

var _ hypervisor.LinkSetter = (*Hypervisor)(nil)

// SetQEMULink implements hypervisor.LinkSetter through QEMU's monitor
// (virDomainQemuMonitorCommand, QMP set_link): libvirt's own link state
// (virDomainUpdateDeviceFlags with <link state=.../>) reaches only the
// interfaces of the domain's definition.
func (h *Hypervisor) SetQEMULink(ctx context.Context, name, device string, up bool) error {
	cmd, err := json.Marshal(map[string]any{"execute": "set_link", "arguments": map[string]any{"name": device, "up": up}})
	if err != nil {
		return err
	}
	return h.onDomain(ctx, "set a link of", name, func(d *golibvirt.Domain) error {
		if err := requireState(d, "set a link of", golibvirt.DOMAIN_RUNNING, golibvirt.DOMAIN_BLOCKED, golibvirt.DOMAIN_PAUSED); err != nil {
			return err
		}
		reply, err := d.QemuMonitorCommand(string(cmd), golibvirt.DOMAIN_QEMU_MONITOR_COMMAND_DEFAULT)
		if err != nil {
			return err
		}
		// libvirt hands QEMU's reply back as it is, an error included.
		var r struct {
			Error *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(reply), &r); err != nil {
			return fmt.Errorf("QEMU's reply to set_link %s: %w: %s", device, err, reply)
		}
		if r.Error != nil {
			return fmt.Errorf("set_link %s: %s: %s", device, r.Error.Class, r.Error.Desc)
		}
		return nil
	})
}
