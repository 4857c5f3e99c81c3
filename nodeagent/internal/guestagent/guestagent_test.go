package guestagent

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Replies of Debian's qemu-ga 7.2 in the test guest (hack/make-guest.sh),
// with a user and a file system added.
var qemuGA = map[string]string{
	"guest-get-osinfo": `{"name":"vmkit test guest","kernel-release":"6.1.0-56-amd64","version":"1","pretty-name":"vmkit test guest (busybox, Debian kernel)","version-id":"1","kernel-version":"#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2026-11-16)","machine":"x86_64","id":"vmkit-test-guest"}`,
	"guest-get-users":  `[{"user":"fedora","login-time":1700000000.25}]`,
	"guest-get-fsinfo": `[{"name":"vda1","mountpoint":"/","type":"ext4","used-bytes":1048576,"total-bytes":4194304,"disk":[{"serial":"root-disk","bus-type":"virtio","bus":0,"unit":0,"target":0}]}]`,
	"guest-network-get-interfaces": `[{"name":"lo","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}],"hardware-address":"00:00:00:00:00:00"},` +
		`{"name":"eth0","ip-addresses":[{"ip-address-type":"ipv6","ip-address":"fe80::5054:ff:fe12:3456","prefix":64},{"ip-address-type":"ipv4","ip-address":"10.0.2.15","prefix":24},{"ip-address-type":"ipv6","ip-address":"fd10:0:2::15","prefix":64}],"hardware-address":"52:54:00:12:34:56"},` +
		`{"name":"eth1","hardware-address":"52:54:00:ab:cd:ef"}]`,
}

var wantOSInfo = v1.VirtualMachineInstanceGuestOSInfo{
	Name: "vmkit test guest", KernelRelease: "6.1.0-56-amd64", Version: "1", PrettyName: "vmkit test guest (busybox, Debian kernel)",
	VersionID: "1", KernelVersion: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2026-11-16)", Machine: "x86_64", ID: "vmkit-test-guest",
}

func TestConversions(t *testing.T) {
	os, err := OSInfo(json.RawMessage(qemuGA["guest-get-osinfo"]))
	if err != nil || os != wantOSInfo {
		t.Errorf("OSInfo = %+v, %v; want %+v", os, err, wantOSInfo)
	}
	spec := []v1.Interface{{Name: "default", MacAddress: "52:54:00:12:34:56"}, {Name: "other", MacAddress: "02:00:00:00:00:01"}}
	ifaces, err := Interfaces(json.RawMessage(qemuGA["guest-network-get-interfaces"]), spec)
	wantIfaces := []v1.VirtualMachineInstanceNetworkInterface{
		{Name: "default", InterfaceName: "eth0", MAC: "52:54:00:12:34:56", IP: "10.0.2.15", IPs: []string{"10.0.2.15", "fd10:0:2::15"}, InfoSource: "guest-agent"},
		{InterfaceName: "eth1", MAC: "52:54:00:ab:cd:ef", InfoSource: "guest-agent"},
	}
	if diff := cmp.Diff(wantIfaces, ifaces); err != nil || diff != "" {
		t.Errorf("Interfaces: %v (-want +got):\n%s", err, diff)
	}
	users, err := Users(json.RawMessage(qemuGA["guest-get-users"]))
	if diff := cmp.Diff([]v1.VirtualMachineInstanceGuestOSUser{{UserName: "fedora", LoginTime: 1700000000.25}}, users); err != nil || diff != "" {
		t.Errorf("Users: %v (-want +got):\n%s", err, diff)
	}
	fs, err := FileSystems(json.RawMessage(qemuGA["guest-get-fsinfo"]))
	wantFS := []v1.VirtualMachineInstanceFileSystem{{DiskName: "vda1", MountPoint: "/", FileSystemType: "ext4", UsedBytes: 1048576, TotalBytes: 4194304,
		Disk: []v1.VirtualMachineInstanceFileSystemDisk{{Serial: "root-disk", BusType: "virtio"}}}}
	if diff := cmp.Diff(wantFS, fs); err != nil || diff != "" {
		t.Errorf("FileSystems: %v (-want +got):\n%s", err, diff)
	}
	for name, fn := range map[string]func(json.RawMessage) error{
		"osinfo":     func(r json.RawMessage) error { _, err := OSInfo(r); return err },
		"interfaces": func(r json.RawMessage) error { _, err := Interfaces(r, nil); return err },
		"users":      func(r json.RawMessage) error { _, err := Users(r); return err },
		"fsinfo":     func(r json.RawMessage) error { _, err := FileSystems(r); return err },
	} {
		if err := fn(json.RawMessage(`"not the shape"`)); err == nil {
			t.Errorf("%s of a malformed reply: no error", name)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"}, {"abcd", 3, "abc"}, {"aé", 2, "a"}, {"aé", 3, "aé"}, {"éé", 3, "é"}, {"", 0, ""}, {"é", 1, ""},
	} {
		if got := truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
