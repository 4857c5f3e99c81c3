package guestagent

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConversions(t *testing.T) {
	qemuGA, wantOSInfo := agenttest.QEMUGA(), agenttest.QEMUGAOSInfo()
	os, err := OSInfo(json.RawMessage(qemuGA["guest-get-osinfo"]))
	if err != nil || os != wantOSInfo {
		t.Errorf("OSInfo = %+v, %v; want %+v", os, err, wantOSInfo)
	}
	spec := []v1.Interface{{Name: "default", MacAddress: agenttest.QEMUGAMAC}, {Name: "other", MacAddress: "02:00:00:00:00:01"}}
	ifaces, err := Interfaces(json.RawMessage(qemuGA["guest-network-get-interfaces"]), spec)
	if diff := cmp.Diff(agenttest.QEMUGAInterfaces(), ifaces); err != nil || diff != "" {
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
