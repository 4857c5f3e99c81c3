package restapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

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
	// No launcher runs: its calls fail as for a launcher that is gone.
	h := Handler(&fakeBackend{node: "node01", client: vmfake.NewSimpleClientset(vmi("running", v1.Running), vmi("stopped", v1.Succeeded)),
		share: f.TempDir(), rec: record.NewFakeRecorder(100)})
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
