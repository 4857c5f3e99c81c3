package restapi

import (
	"io"
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

// A client that just saw a VMI Running (from the API server) must not be
// refused because the agent's cache still holds an older copy, even the one
// from before the agent's own write; a VMI that is not Running, or not on
// this node, on the API server as well is refused.
func TestRESTAsksTheAPIServerWhenTheCacheLags(t *testing.T) {
	vmi := func(name, node string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Status: v1.VirtualMachineInstanceStatus{Phase: phase, NodeName: node}}
	}
	client := vmfake.NewSimpleClientset(
		vmi("running", "node01", v1.Running), vmi("scheduled", "node01", v1.Scheduled), vmi("moved", "node02", v1.Running))
	b := &fakeBackend{node: "node01", client: client, share: t.TempDir(), rec: record.NewFakeRecorder(10)}
	// The cache holds "running" as it was before it ran, and has not seen
	// the others at all.
	b.setCached(vmi("running", "node01", v1.Scheduled))
	srv := httptest.NewServer(Handler(b))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name     string
		wantCode int
		wantBody string
	}{
		// Past the lookup: refused only for having no guest agent.
		{"running", http.StatusConflict, "VMI does not have a guest agent connected"},
		{"scheduled", http.StatusConflict, "is not running (phase Scheduled)"},
		{"moved", http.StatusNotFound, "does not run on node node01"},
		{"missing", http.StatusNotFound, "does not run on node node01"},
	} {
		resp, err := http.Get(srv.URL + "/v1/namespaces/ns/virtualmachineinstances/" + tc.name + "/guestosinfo")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantCode || !strings.Contains(string(body), tc.wantBody) {
			t.Errorf("GET guestosinfo of %s = %d %q, want %d with %q", tc.name, resp.StatusCode, body, tc.wantCode, tc.wantBody)
		}
	}
}
