package nodeagent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// FuzzGuestAgentReplies: what the guest's agent answers is the guest's to
// write. No reply makes the agent's parsers panic, interfaces are only
// ever matched to the VMI's own, and what goes into the VMI's status
// stays within its bounds (maxGuestInterfaces, maxGuestIPs,
// maxGuestString, maxGuestMAC).
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
		if os, err := guestOSInfo(msg); err == nil {
			for _, f := range []string{os.Name, os.KernelRelease, os.Version, os.PrettyName, os.VersionID, os.KernelVersion, os.Machine, os.ID} {
				if len(f) > maxGuestString {
					t.Errorf("guestOSInfo(%q) keeps a string of %d bytes", raw, len(f))
				}
			}
		}
		_, _ = guestUsers(msg)
		_, _ = guestFileSystems(msg)
		ifaces, err := guestInterfaces(msg, spec)
		if err != nil {
			return
		}
		others := 0
		for _, i := range ifaces {
			if i.Name != "" && i.Name != "default" {
				t.Errorf("guestInterfaces(%q) reports interface %q, which the VMI does not have", raw, i.Name)
			}
			if i.Name == "" {
				others++
			}
			if len(i.IPs) > maxGuestIPs || len(i.InterfaceName) > maxGuestString || len(i.MAC) > maxGuestMAC {
				t.Errorf("guestInterfaces(%q) keeps %d addresses, a name of %d bytes, a MAC of %d bytes", raw, len(i.IPs), len(i.InterfaceName), len(i.MAC))
			}
		}
		if others > maxGuestInterfaces {
			t.Errorf("guestInterfaces(%q) keeps %d interfaces the VMI does not have", raw, others)
		}
	})
}

// FuzzRESTRoutes: any method and path sent to the node agent's REST API
// gets an answer below 500 and never a panic: unknown routes 404 or 405,
// unknown or foreign VMIs 404, VMIs that do not run 409.
func FuzzRESTRoutes(f *testing.F) {
	for _, s := range []struct{ method, path string }{
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/running/guestosinfo"},
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/stopped/console"},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/running/pause"},
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/missing/vnc"},
		{"DELETE", "/v1/namespaces/ns/virtualmachineinstances/running/pause"},
		{"GET", "/v1/namespaces/../virtualmachineinstances/x/userlist"},
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/%2e%2e/filesystemlist"},
		{"GET", "/v1/namespaces//virtualmachineinstances//guestosinfo"},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/" + strings.Repeat("a", 300) + "/unpause"},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/running/softreboot"},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/stopped/reset"},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/running/freeze"},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/stopped/unfreeze"},
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/running/portforward/22"},
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/running/portforward/99999/udp"},
		{"GET", "/v1/namespaces/ns/virtualmachineinstances/running/portforward/-1/tcp"},
		{"GET", "/"},
	} {
		f.Add(s.method, s.path)
	}
	vmi := func(name string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Status: v1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "node01"}}
	}
	dir := f.TempDir()
	a, err := New(Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(vmi("running", v1.Running), vmi("stopped", v1.Succeeded)),
		Kube: fake.NewClientset(), ShareDir: dir, KubeletPodsDir: dir, Recorder: record.NewFakeRecorder(100)})
	if err != nil {
		f.Fatal(err)
	}
	h := a.Handler()
	f.Fuzz(func(t *testing.T, method, path string) {
		req, err := http.NewRequest(method, "http://node/", nil)
		if err != nil {
			return // not a method net/http would hand the server
		}
		req.URL.Path, req.URL.RawPath = path, ""
		req.RequestURI = path
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Errorf("%s %q = %d %q", method, path, w.Code, w.Body)
		}
	})
}
