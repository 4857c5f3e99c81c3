// Package dhcp is the DHCPv4 and DHCPv6 server that gives a VM guest its
// addresses, and the IPv6 router advertisements that give it its IPv6
// default route.
//
// virt-launcher runs it inside the launcher pod's network namespace, on the
// device the guest's NIC is attached to (the k6t-eth0 bridge of the masquerade
// and bridge bindings), as KubeVirt's launcher does. The guest's DHCP client
// then receives the address, mask, gateway, DNS servers and search domains,
// host name, MTU and routes the launcher chose for it: for masquerade the
// private 10.0.2.2/24 behind the pod's NAT, for bridge the pod's own address.
//
// The server answers one client. Each interface it serves is a point-to-point
// link between the pod and one guest NIC, so it has one fixed Lease and no
// pool, no lease database and no state between messages: Reply offers and
// acknowledges the lease's address and refuses (NAK) any other, and with
// Lease.ClientMAC set it stays silent to every other MAC address, so that a
// second DHCP client on the link (a nested VM, a container in the guest)
// cannot take the guest's address.
//
// Reply is the whole protocol decision, a pure function from request and
// lease to answer; Serve only moves packets between it and a UDP socket bound
// to the interface. ReadResolvConf turns the pod's /etc/resolv.conf into the
// lease's DNS servers and search domains, so the guest resolves names the
// way the pod does.
//
// IPv6 (Lease6, Serve6, Reply6) follows the same shape: one address for one
// guest, by DHCPv6 (IA_NA), plus router advertisements from the device's
// link-local address with the Managed flag, the on-link prefix, the MTU and
// the name servers (RDNSS, DNSSL).
//
// The package builds on github.com/insomniacslk/dhcp: its dhcpv4 and dhcpv6
// packages encode and decode messages and options (rfc1035label for the
// domain search list, option 119), and server4 and server6 open the
// interface-bound sockets; github.com/mdlayher/ndp encodes the router
// advertisements.
package dhcp
