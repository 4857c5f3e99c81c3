package guestagent

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// FuzzGuestAgentReplies: what the guest's agent answers is the guest's to
// write. No reply makes the agent's parsers panic, interfaces are only
// ever matched to the VMI's own, and what goes into the VMI's status
// stays within its bounds (MaxInterfaces, MaxIPs, MaxString, MaxMAC).
func FuzzGuestAgentReplies(f *testing.F) {
	for _, s := range []string{
		`{"id":"debian","name":"Debian GNU/Linux","kernel-release":"6.1.0","machine":"x86_64"}`,
		`[{"name":"eth0","hardware-address":"52:54:00:12:34:56","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"10.0.2.2","prefix":24}]}]`,
		`[{"user":"root","login-time":1700000000.5}]`, `[{"name":"vda1","mountpoint":"/","type":"ext4","total-bytes":1,"used-bytes":2}]`,
		`null`, `[]`, `{}`, `[null]`, `[{"ip-addresses":[null]}]`, `[{"hardware-address":"zz"}]`, `"x"`, `1e999`, ``,
		// More interfaces and addresses than the status keeps.
		"[" + strings.Repeat(`{"name":"veth","ip-addresses":[`+strings.Repeat(`{"ip-address":"10.1.2.3"},`, 20)+`{"ip-address":"fd00::1"}]},`, 40) +
			`{"name":"eth0","hardware-address":"52:54:00:12:34:56"}]`,
	} {
		f.Add([]byte(s))
	}
	spec := []v1.Interface{{Name: "default", MacAddress: "52:54:00:12:34:56"}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		msg := json.RawMessage(raw)
		if os, err := OSInfo(msg); err == nil {
			for _, f := range []string{os.Name, os.KernelRelease, os.Version, os.PrettyName, os.VersionID, os.KernelVersion, os.Machine, os.ID} {
				if len(f) > MaxString {
					t.Errorf("OSInfo(%q) keeps a string of %d bytes", raw, len(f))
				}
			}
		}
		_, _ = Users(msg)
		_, _ = FileSystems(msg)
		ifaces, err := Interfaces(msg, spec)
		if err != nil {
			return
		}
		others := 0
		for _, i := range ifaces {
			if i.Name != "" && i.Name != "default" {
				t.Errorf("Interfaces(%q) reports interface %q, which the VMI does not have", raw, i.Name)
			}
			if i.Name == "" {
				others++
			}
			if len(i.IPs) > MaxIPs || len(i.InterfaceName) > MaxString || len(i.MAC) > MaxMAC {
				t.Errorf("Interfaces(%q) keeps %d addresses, a name of %d bytes, a MAC of %d bytes", raw, len(i.IPs), len(i.InterfaceName), len(i.MAC))
			}
		}
		if others > MaxInterfaces {
			t.Errorf("Interfaces(%q) keeps %d interfaces the VMI does not have", raw, others)
		}
	})
}
