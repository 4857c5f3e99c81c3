package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/internal/procfs"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// ReasonNetworkSetupFailed is the reason of a VMI that failed because its
// interfaces could not be wired (an unsupported binding, a launcher pod on
// the host network, an error in the pod's network namespace).
const ReasonNetworkSetupFailed = "NetworkSetupFailed"

// InfoSourceDomain marks interfaces in status.interfaces known from the
// domain and the pod (name, MAC, the pod's addresses), as KubeVirt does;
// "domain, guest-agent" when the guest agent reported the same interface.
const InfoSourceDomain = "domain"

// networkError is a wiring failure that retrying cannot fix: the VMI
// fails with ReasonNetworkSetupFailed.
type networkError struct{ err error }

func (e *networkError) Error() string { return e.err.Error() }
func (e *networkError) Unwrap() error { return e.err }

// wireNetwork wires vmi's interfaces on the pod network in its launcher
// pod's network namespace (found through the launcher's PID) and tells the
// launcher the MACs and DHCP leases to use. It returns nil results for a
// VMI without pod network interfaces. A *networkError says the VMI cannot
// run; other errors are worth a retry.
func (a *Agent) wireNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) ([]network.Result, error) {
	plan, err := network.Plan(vmi)
	if err != nil {
		return nil, &networkError{err}
	}
	if len(plan) == 0 {
		return nil, nil
	}
	first := fmt.Sprintf("spec.domain.devices.interfaces[%d] (%s)", plan[0].Index, plan[0].Name)
	pid, err := c.PID(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding the launcher process: %w", err)
	}
	if pid <= 0 {
		return nil, &networkError{fmt.Errorf("%s: the launcher runs in a PID namespace the node agent cannot see (virt-handler needs hostPID)", first)}
	}
	nsPath := "/proc/" + strconv.Itoa(pid) + "/ns/net"
	same, err := network.SameNamespace(nsPath)
	if err != nil {
		return nil, fmt.Errorf("reading the launcher's network namespace %s: %w", nsPath, err)
	}
	if same {
		return nil, &networkError{fmt.Errorf("%s: the launcher pod shares the node's network namespace (hostNetwork); an interface on the pod network needs a launcher pod on the pod network", first)}
	}
	// The taps belong to the launcher's user: QEMU, running as it, opens
	// them (root for a root launcher, the qemu user 107 by default).
	uid, gid, err := procfs.User(pid)
	if err != nil {
		return nil, fmt.Errorf("the launcher's user: %w", err)
	}
	files, err := procfs.OpenFileLimit(pid)
	if err != nil {
		return nil, fmt.Errorf("the launcher's open-file limit: %w", err)
	}
	results, err := network.Setup(nsPath, plan, network.Options{TapOwner: uid, TapGroup: gid, OpenFileLimit: files})
	if err != nil {
		return nil, &networkError{err}
	}
	hostname := vmi.Spec.Hostname
	if hostname == "" {
		hostname = vmi.Name
	}
	ifaces := make([]client.NetworkInterface, len(results))
	for i, r := range results {
		if r.Passt {
			ifaces[i] = client.NetworkInterface{Name: r.Interface, MAC: r.MAC, Passt: &client.PasstConfig{Ports: network.PasstArgs(plan[i])}}
			continue
		}
		ifaces[i] = client.NetworkInterface{Name: r.Interface, MAC: r.MAC}
		if r.Lease.IP.IP != nil { // none on a layer-2 secondary network
			lease := r.Lease
			lease.Hostname = hostname
			ifaces[i].DHCP = &lease
		}
		ifaces[i].DHCPv6 = r.Lease6
	}
	if _, err := c.ConfigureNetwork(ctx, ifaces); err != nil {
		return nil, fmt.Errorf("handing the network configuration to the launcher: %w", err)
	}
	a.mu.Lock()
	a.networks[vmi.UID] = results
	a.wiredAt[vmi.UID] = a.now()
	a.mu.Unlock()
	// The launcher serves the DHCPv6 the advertisements point the guest
	// to; they need a raw ICMPv6 socket, which only the agent may open.
	a.advertisers.Start(string(vmi.UID), nsPath, results, klog.Background().WithValues("vmi", klog.KObj(vmi)))
	return results, nil
}

// lostAdvertiser reports whether vmi runs here with an IPv6 address on a
// masquerade or bridge interface that this agent did not wire: an earlier
// agent did, and the router advertisements ended with it.
func (a *Agent) lostAdvertiser(vmi *v1.VirtualMachineInstance) bool {
	if a.networkOf(vmi.UID) != nil || vmi.Status.NodeName != a.cfg.NodeName {
		return false
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Masquerade == nil && iface.Bridge == nil {
			continue
		}
		for _, st := range vmi.Status.Interfaces {
			if st.Name != iface.Name {
				continue
			}
			for _, ip := range st.IPs {
				if p := net.ParseIP(ip); p != nil && p.To4() == nil {
					return true
				}
			}
		}
	}
	return false
}

// networkOf returns what wireNetwork did for the VMI with the given UID,
// nil when this agent did not wire it (no pod interface, or wired before
// the agent restarted: the stored status is kept then).
func (a *Agent) networkOf(uid types.UID) []network.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.networks[uid]
}

func (a *Agent) forgetNetwork(uid types.UID) {
	a.advertisers.Stop(string(uid))
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.networks, uid)
	delete(a.wiredAt, uid)
	delete(a.hotplugMounts, uid)
}

// isNetworkError reports whether err is a wiring failure the VMI cannot
// recover from.
func isNetworkError(err error) bool {
	var ne *networkError
	return errors.As(err, &ne)
}

// networkInterfaces is status.interfaces from the wired interfaces and what
// the guest agent reports (nil when it reported nothing): each wired
// interface with its MAC and the pod's addresses, joined by the guest
// interface that holds its DHCP address, or (an interface the agent gave
// no address, on a layer-2 secondary network) has its MAC, which gives
// the guest's device name and addresses; then the guest's other
// interfaces.
func networkInterfaces(wired []network.Result, guest []v1.VirtualMachineInstanceNetworkInterface) []v1.VirtualMachineInstanceNetworkInterface {
	out := make([]v1.VirtualMachineInstanceNetworkInterface, 0, len(wired)+len(guest))
	used := make([]bool, len(guest))
	for _, r := range wired {
		iface := v1.VirtualMachineInstanceNetworkInterface{Name: r.Interface, MAC: r.MAC, PodInterfaceName: r.PodInterface, InfoSource: InfoSourceDomain}
		if len(r.PodIPs) > 0 {
			iface.IP, iface.IPs = r.PodIPs[0], append([]string(nil), r.PodIPs...)
		}
		for i, g := range guest {
			if used[i] {
				continue
			}
			if r.Lease.IP.IP != nil && !holds(g, r.Lease.IP.IP) || r.Lease.IP.IP == nil && (r.MAC == "" || !strings.EqualFold(g.MAC, r.MAC)) {
				continue
			}
			used[i] = true
			iface.InterfaceName = g.InterfaceName
			if iface.MAC == "" {
				iface.MAC = g.MAC
			}
			if len(iface.IPs) == 0 && len(g.IPs) > 0 {
				iface.IP, iface.IPs = g.IP, g.IPs
			}
			iface.InfoSource = InfoSourceDomain + ", " + InfoSourceGuestAgent
			break
		}
		out = append(out, iface)
	}
	for i, g := range guest {
		if !used[i] {
			out = append(out, g)
		}
	}
	return out
}

// holds reports whether the guest interface has address ip.
func holds(g v1.VirtualMachineInstanceNetworkInterface, ip net.IP) bool {
	for _, s := range g.IPs {
		if parsed := net.ParseIP(s); parsed != nil && parsed.Equal(ip) {
			return true
		}
	}
	return false
}
