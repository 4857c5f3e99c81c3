package nodeagent_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/nodeagent"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
)

// An Agent runs on every node (cmd/virt-handler wires it to flags): Run
// watches the VMIs placed on the node and drives their launchers; Handler
// is its REST API (console, VNC, pause, ...: nodeagent/restapi, with the
// agent as its Backend); Registry holds the metrics.
func Example() {
	dir, _ := os.MkdirTemp("", "nodeagent-example")
	defer os.RemoveAll(dir)
	agent, err := nodeagent.New(nodeagent.Config{
		NodeName: "node01",
		Client:   vmfake.NewSimpleClientset(),
		Kube:     fake.NewClientset(),
		ShareDir: dir, // launchers' sockets: <dir>/sockets/<vmi uid>/launcher.sock
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// go agent.Run(ctx) would start it; the REST API answers for the VMIs
	// on this node only.
	srv := httptest.NewServer(agent.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/namespaces/default/virtualmachineinstances/vm1/pause", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("pause a VMI that is not on this node:", resp.Status)
	// Output:
	// pause a VMI that is not on this node: 404 Not Found
}
