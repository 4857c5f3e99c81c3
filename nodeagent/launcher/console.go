package launcher

import (
	"context"

	"k8s.io/klog/v2"
)

// attachSerial connects the console hub to domain name's serial console,
// unless the VMI has none (autoattachSerialConsole: false); a failure is
// logged.
func (l *Launcher) attachSerial(ctx context.Context, name string) {
	if a := l.vmi.Spec.Domain.Devices.AutoattachSerialConsole; a != nil && !*a {
		return
	}
	c, err := l.h.Console(ctx, name)
	if err != nil {
		klog.FromContext(ctx).Error(err, "attaching the serial console", "vmi", l.key(), "domain", name)
		return
	}
	l.console.Attach(c)
}
