package launcher

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// DefaultResolvConf is the pod's resolver configuration, whose name servers
// and search domains the guest gets by DHCP.
const DefaultResolvConf = "/etc/resolv.conf"

// ConfigureNetwork records the interfaces the node agent wired and starts
// a DHCP server for each that has a lease. It is idempotent: a server
// already answering on an interface is kept, so an agent that restarted
// may send the same configuration again. Call it before Sync.
func (l *Launcher) ConfigureNetwork(ctx context.Context, ifaces []client.NetworkInterface) (client.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.final != nil {
		return *l.final, errFinal
	}
	for _, ni := range ifaces {
		if ni.MAC != "" {
			if _, err := net.ParseMAC(ni.MAC); err != nil {
				return l.statusLocked(), fmt.Errorf("network configuration of VMI %s: interface %s: %w", l.key(), ni.Name, err)
			}
		}
	}
	for _, ni := range ifaces {
		if ni.MAC != "" {
			l.macs[ni.Name] = ni.MAC
		}
		if ni.Passt != nil {
			l.passtIface, l.passtArgs = ni.Name, slices.Clone(ni.Passt.Ports)
		}
		if err := l.startDHCPv6(ctx, ni); err != nil {
			return l.statusLocked(), err
		}
		if ni.DHCP == nil || l.dhcp[ni.DHCP.ServerInterface] {
			continue
		}
		lease := *ni.DHCP
		if len(lease.DNS) == 0 && len(lease.SearchDomains) == 0 {
			lease.DNS, lease.SearchDomains = l.podResolvers(ctx, false)
		}
		if err := lease.Validate(); err != nil {
			return l.statusLocked(), fmt.Errorf("network configuration of VMI %s: interface %s: %w", l.key(), ni.Name, err)
		}
		l.dhcp[lease.ServerInterface] = true
		go l.serveDHCP(ni.Name, lease)
	}
	return l.statusLocked(), nil
}

// serveDHCP answers DHCP for one interface until the launcher ends.
func (l *Launcher) serveDHCP(name string, lease dhcp.Lease) {
	log := klog.Background().WithValues("vmi", l.key(), "interface", name, "device", lease.ServerInterface)
	log.Info("serving DHCP", "address", lease.IP.String(), "router", lease.Router, "dns", lease.DNS)
	if err := dhcp.Serve(l.runCtx, lease); err != nil {
		log.Error(err, "DHCP server stopped: the guest gets no address on this interface")
		l.mu.Lock()
		delete(l.dhcp, lease.ServerInterface)
		l.mu.Unlock()
	}
}

// podResolvers are the pod's name servers of one family (IPv6 or IPv4)
// and its search domains, from its resolv.conf, for a lease that names
// none; an unreadable file is logged and gives none.
func (l *Launcher) podResolvers(ctx context.Context, ipv6 bool) ([]net.IP, []string) {
	dns, search, err := dhcp.ReadResolvConf(l.cfg.ResolvConf)
	if err != nil {
		klog.FromContext(ctx).Error(err, "the guest gets no name servers from the launcher", "vmi", l.key(), "ipv6", ipv6)
	}
	var out []net.IP
	for _, ip := range dns {
		if (ip.To4() == nil) == ipv6 {
			out = append(out, ip)
		}
	}
	return out, search
}

// startDHCPv6 starts the DHCPv6 server for ni, unless it has no IPv6 lease
// or the server already runs.
func (l *Launcher) startDHCPv6(ctx context.Context, ni client.NetworkInterface) error {
	if ni.DHCPv6 == nil || l.dhcp[dhcpv6Key(ni.DHCPv6.ServerInterface)] {
		return nil
	}
	lease := *ni.DHCPv6
	if len(lease.DNS) == 0 && len(lease.SearchDomains) == 0 {
		lease.DNS, lease.SearchDomains = l.podResolvers(ctx, true)
	}
	if err := lease.Validate(); err != nil {
		return fmt.Errorf("network configuration of VMI %s: interface %s: DHCPv6: %w", l.key(), ni.Name, err)
	}
	key := dhcpv6Key(lease.ServerInterface)
	l.dhcp[key] = true
	go func() {
		log := klog.Background().WithValues("vmi", l.key(), "interface", ni.Name, "device", lease.ServerInterface)
		log.Info("serving DHCPv6", "address", lease.IP.String(), "dns", lease.DNS)
		if err := dhcp.Serve6(l.runCtx, lease); err != nil {
			log.Error(err, "DHCPv6 server stopped: the guest gets no IPv6 address on this interface")
			l.mu.Lock()
			delete(l.dhcp, key)
			l.mu.Unlock()
		}
	}()
	return nil
}

// dhcpv6Key is the key of an interface's IPv6 servers in Launcher.dhcp.
func dhcpv6Key(device string) string { return "v6/" + device }

// hasPasstBinding reports whether an interface of vmi uses the passtBinding.
func hasPasstBinding(vmi *v1.VirtualMachineInstance) bool {
	return slices.ContainsFunc(vmi.Spec.Domain.Devices.Interfaces, func(i v1.Interface) bool { return i.PasstBinding != nil })
}

// withNetworkMACs returns vmi with the MACs the node agent chose for
// interfaces the spec gives none (a copy when it changes anything).
func (l *Launcher) withNetworkMACs(vmi *v1.VirtualMachineInstance) *v1.VirtualMachineInstance {
	changed := false
	for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
		mac, ok := l.macs[iface.Name]
		if !ok || iface.MacAddress != "" {
			continue
		}
		if !changed {
			vmi, changed = vmi.DeepCopy(), true
		}
		vmi.Spec.Domain.Devices.Interfaces[i].MacAddress = strings.ToLower(mac)
	}
	return vmi
}
