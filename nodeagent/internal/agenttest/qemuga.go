package agenttest

import v1 "github.com/vmkit/vmkit/vmapi/v1"

// QEMUGA returns the replies of Debian's qemu-ga 7.2 in the test guest
// (hack/make-guest.sh), with a user and a file system added, by command:
// what hvfake.GuestAgentReplies serves.
func QEMUGA() map[string]string {
	return map[string]string{
		"guest-ping":          `{}`,
		"guest-info":          `{"version":"7.2.22","supported_commands":[{"enabled":true,"name":"guest-get-osinfo","success-response":true},{"enabled":false,"name":"guest-exec","success-response":true}]}`,
		"guest-get-host-name": `{"host-name":"vmkit-guest"}`,
		"guest-get-timezone":  `{"zone":"UTC","offset":0}`,
		"guest-get-osinfo":    `{"name":"vmkit test guest","kernel-release":"6.1.0-56-amd64","version":"1","pretty-name":"vmkit test guest (busybox, Debian kernel)","version-id":"1","kernel-version":"#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2026-11-16)","machine":"x86_64","id":"vmkit-test-guest"}`,
		"guest-get-users":     `[{"user":"fedora","login-time":1700000000.25}]`,
		"guest-get-fsinfo":    `[{"name":"vda1","mountpoint":"/","type":"ext4","used-bytes":1048576,"total-bytes":4194304,"disk":[{"serial":"root-disk","bus-type":"virtio","bus":0,"unit":0,"target":0}]}]`,
		"guest-network-get-interfaces": `[{"name":"lo","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}],"hardware-address":"00:00:00:00:00:00"},` +
			`{"name":"eth0","ip-addresses":[{"ip-address-type":"ipv6","ip-address":"fe80::5054:ff:fe12:3456","prefix":64},{"ip-address-type":"ipv4","ip-address":"10.0.2.15","prefix":24},{"ip-address-type":"ipv6","ip-address":"fd10:0:2::15","prefix":64}],"hardware-address":"52:54:00:12:34:56"},` +
			`{"name":"eth1","hardware-address":"52:54:00:ab:cd:ef"}]`,
	}
}

// QEMUGAMAC is the MAC of QEMUGA's eth0.
const QEMUGAMAC = "52:54:00:12:34:56"

// QEMUGAOSInfo is the guestOSInfo of QEMUGA's guest-get-osinfo.
func QEMUGAOSInfo() v1.VirtualMachineInstanceGuestOSInfo {
	return v1.VirtualMachineInstanceGuestOSInfo{
		Name: "vmkit test guest", KernelRelease: "6.1.0-56-amd64", Version: "1", PrettyName: "vmkit test guest (busybox, Debian kernel)",
		VersionID: "1", KernelVersion: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2026-11-16)", Machine: "x86_64", ID: "vmkit-test-guest",
	}
}

// QEMUGAInterfaces are the VMI's status.interfaces from QEMUGA's
// guest-network-get-interfaces when the VMI's interface "default" has
// MAC QEMUGAMAC: eth0 with its global addresses under that name, eth1
// without a name, the loopback left out.
func QEMUGAInterfaces() []v1.VirtualMachineInstanceNetworkInterface {
	return []v1.VirtualMachineInstanceNetworkInterface{
		{Name: "default", InterfaceName: "eth0", MAC: QEMUGAMAC, IP: "10.0.2.15", IPs: []string{"10.0.2.15", "fd10:0:2::15"}, InfoSource: "guest-agent"},
		{InterfaceName: "eth1", MAC: "52:54:00:ab:cd:ef", InfoSource: "guest-agent"},
	}
}
