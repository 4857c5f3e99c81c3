// Package network wires a VM's interface on the pod network inside the
// launcher pod's network namespace, with KubeVirt's semantics and device
// names.
//
// The node agent (virt-handler's role) calls it for each VMI placed on its
// node, after the launcher pod is up and before the launcher starts the
// domain: Plan picks the interface of spec.domain.devices.interfaces that is
// backed by the pod network (spec.networks[j].pod; Multus networks are the
// CNI's business), Setup wires it in the namespace of the launcher's process
// (/proc/<pid>/ns/net) and returns, per interface, the DHCP lease the
// launcher's server (package nodeagent/network/dhcp) must hand the guest, the
// guest MAC and the pod's IPs for status.interfaces.
//
// The agent does this, not the launcher, because creating devices, moving
// addresses and programming nftables need CAP_NET_ADMIN: done by the
// privileged agent, the launcher pod runs without it (as in KubeVirt, where
// virt-handler prepares the pod network and virt-launcher only attaches
// QEMU to the tap). SameNamespace lets the agent refuse a launcher that
// shares the node's namespace (host network); Setup refuses it too.
//
// # Devices
//
// In the pod: eth0 is the pod network's device (the CNI made it), k6t-eth0
// a bridge, and tap0 a persistent tap (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, single
// queue) owned by Options.TapOwner:TapGroup, the launcher's QEMU user, which
// the domain's NIC attaches to (<interface type="ethernet"><target
// dev="tap0" managed="no"/>, see domainxml). tap0 and k6t-eth0 get eth0's
// MTU.
//
// The masquerade binding leaves eth0 alone and puts the guest behind NAT:
// k6t-eth0 has 10.0.2.1/24 and tap0 as its port; the guest gets 10.0.2.2/24
// with router 10.0.2.1 by DHCP (from 10.0.2.1 on k6t-eth0); the pod forwards
// (net.ipv4.ip_forward=1) and routes 127.0.0.1 to the guest
// (net.ipv4.conf.all.route_localnet=1). Setup programs this rule set, shown
// here for spec ports [TCP 80] (without ports, the output and
// KUBEVIRT_PREINBOUND rules forward every port; Ruleset renders it):
//
//	table ip nat {
//		chain prerouting {
//			type nat hook prerouting priority dstnat; policy accept;
//			iifname "eth0" jump KUBEVIRT_PREINBOUND
//		}
//
//		chain postrouting {
//			type nat hook postrouting priority srcnat; policy accept;
//			ip saddr 10.0.2.2 masquerade
//			oifname "k6t-eth0" jump KUBEVIRT_POSTINBOUND
//		}
//
//		chain output {
//			type nat hook output priority -100; policy accept;
//			ip daddr 127.0.0.1 tcp dport 80 dnat to 10.0.2.2
//		}
//
//		chain KUBEVIRT_PREINBOUND {
//			tcp dport 80 dnat to 10.0.2.2
//		}
//
//		chain KUBEVIRT_POSTINBOUND {
//			ip saddr 127.0.0.1 snat to 10.0.2.1
//		}
//	}
//
// so the guest reaches the world as the pod IP, connections to the pod IP
// (on eth0) reach the guest with their source intact, and connections from
// inside the pod to 127.0.0.1 reach the guest from 10.0.2.1. Setup programs
// it through github.com/google/nftables (netlink, no nft binary), in one
// atomic batch that touches only these chains of table ip nat.
//
// The bridge binding gives the guest the pod's place on the pod network:
// Setup takes eth0's IPv4 address and routes away, makes eth0 and tap0
// ports of k6t-eth0 with MAC learning off on eth0 (as KubeVirt: the node's
// bridge may send the guest's own broadcasts back in through eth0, hairpin
// mode, and k6t-eth0 must keep the guest's MAC on tap0), and gives k6t-eth0
// the link-local 169.254.75.10/32 that the DHCP server answers from. The
// lease hands the guest the pod's IP and prefix, its default gateway as
// router and its other routes as classless static routes, and answers only
// the guest's MAC. Without a spec macAddress the guest takes eth0's
// original MAC (which the node network has learned for the pod IP) and eth0
// gets a random locally administered one; Result.MAC tells which, for the
// domain and status.
//
// # Idempotence
//
// Every step looks before it acts, so a second Setup on a wired namespace
// (a restarted agent) changes nothing and returns the same results, and
// Setup after a failed one finishes the job; an error names the interface
// and the step ("spec.domain.devices.interfaces[0] (default): creating
// tap0: ..."). What the bridge binding takes from eth0 is recorded as
// k6t-eth0's alias (ip link show k6t-eth0 shows "alias vmkit-pod: ip=...
// mac=... gw=... routes=..."), written when the bridge is created and
// before eth0 is changed; a second Setup reads the lease from there.
//
// # IPv6
//
// When the pod has an IPv6 address, Result.Lease6 says what the launcher's
// DHCPv6 server and the node agent's router advertisements give the guest.
// Masquerade puts the guest at fd10:0:2::2/120 behind fd10:0:2::1 as well
// (KubeVirt's defaults), with the same NAT in table ip6 nat. The bridge
// binding hands the pod's IPv6 address to the guest, makes the pod the
// guest's IPv6 router, and keeps the advertisements and DHCPv6 answers off
// the pod network (table bridge vmkit-guest).
//
// # Limits
//
// Masquerade uses KubeVirt's default guest networks 10.0.2.0/24 and
// fd10:0:2::/120 only (Plan refuses another spec.networks[].pod.vmNetworkCIDR
// or vmIPv6NetworkCIDR). The tap is single queue. Setup undoes nothing: the
// namespace goes away with the launcher pod.
package network
