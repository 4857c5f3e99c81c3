package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/passt"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// passtLocked starts passt on socket when vmi has an interface with the
// passtBinding: before the domain starts here, and before a migrating
// domain arrives (its QEMU connects to passt as it starts).
func (l *Launcher) passtLocked(ctx context.Context, vmi *v1.VirtualMachineInstance, socket string) error {
	if !hasPasstBinding(vmi) {
		return nil
	}
	if l.passtArgs == nil {
		return errors.New("the node agent has not configured the passtBinding interface yet")
	}
	return l.startPasstLocked(ctx, socket)
}

// passtLinkDown is how long the passt NIC of a guest that migrated here
// stays down (refreshPasstLink): long enough for a guest that polls its
// NIC's carrier once a second to see it change.
const passtLinkDown = 1500 * time.Millisecond

// refreshPasstLink takes the passt NIC of the guest that migrated here as
// domain name down and up again, KubeVirt's link refresh: passt here
// serves this pod's address, not the source pod's, and a guest asks for a
// new DHCP lease when its NIC's carrier comes back (systemd-networkd does;
// the test guest watches /sys/class/net). The guest's
// connections through the source pod's address end: that pod is gone.
func (l *Launcher) refreshPasstLink(ctx context.Context, name string) {
	log := klog.FromContext(ctx).WithValues("vmi", l.key(), "device", domainxml.PasstNICID)
	ls, ok := l.h.(hypervisor.LinkSetter)
	if !ok {
		log.Error(errors.ErrUnsupported, "the hypervisor cannot set the passt NIC's link: the migrated guest keeps the source pod's address")
		return
	}
	for _, up := range []bool{false, true} {
		if up {
			select {
			case <-ctx.Done():
				return
			case <-time.After(passtLinkDown):
			}
		}
		if err := ls.SetQEMULink(ctx, name, domainxml.PasstNICID, up); err != nil {
			log.Error(err, "setting the passt NIC's link of the migrated guest", "up", up)
			return
		}
	}
	log.Info("the migrated guest's passt link went down and up: it renews its lease from this pod's passt")
}

// startPasstLocked starts passt on socket in the pod's network namespace,
// with the port arguments the node agent sent (NetworkInterface.Passt),
// and waits until it listens (package passt). It runs for as long as the
// launcher runs; a passt already running is kept.
func (l *Launcher) startPasstLocked(ctx context.Context, socket string) error {
	if l.passt != nil {
		if exited, err := l.passt.Exited(); exited {
			return fmt.Errorf("passt, which connects interface %s to the pod network, exited: %v", l.passtIface, err)
		}
		return nil
	}
	p, err := passt.Start(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("vmi", l.key())), l.runCtx, socket, l.passtIface, l.passtArgs)
	if err != nil {
		return err
	}
	l.passt = p
	return nil
}
