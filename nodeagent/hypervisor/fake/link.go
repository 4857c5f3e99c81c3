package fake

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

var _ hypervisor.LinkSetter = (*Hypervisor)(nil)

// SetQEMULink implements hypervisor.LinkSetter: the device must be named
// by an "id=" in the domain's QEMU arguments (<qemu:commandline>); Links
// reads the states back, in order. Calls records "SetQEMULink name
// device=up|down".
func (f *Hypervisor) SetQEMULink(ctx context.Context, name, device string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "SetQEMULink", name+" "+device+"="+state); err != nil {
		return err
	}
	d, dom, err := f.liveDomain("set a link of", name)
	if err != nil {
		return err
	}
	found := false
	if cl := dom.QEMUCommandline; cl != nil {
		for _, a := range cl.Args {
			for _, opt := range strings.Split(a.Value, ",") {
				found = found || opt == "id="+device
			}
		}
	}
	if !found {
		return fmt.Errorf("set a link of %s: no QEMU device %q", name, device)
	}
	d.links = append(d.links, device+"="+state)
	return nil
}

// Links returns the link changes SetQEMULink made to the named domain, as
// "device=up" or "device=down", oldest first.
func (f *Hypervisor) Links(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.domains[name]; ok {
		return append([]string(nil), d.links...)
	}
	return nil
}
