package restapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vmkit/vmkit/nodeagent/restapi"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// emptyNode is a Backend whose node runs no VMI. A request for a VMI that
// is not there reaches no launcher: the methods it does not call come from
// the embedded (nil) Backend.
type emptyNode struct{ restapi.Backend }

func (emptyNode) NodeName() string { return "node01" }

func (emptyNode) CachedVMI(_, name string) (*v1.VirtualMachineInstance, error) {
	return nil, apierrors.NewNotFound(v1.Resource("virtualmachineinstances"), name)
}

func (emptyNode) FreshVMI(_ context.Context, _, name string) (*v1.VirtualMachineInstance, error) {
	return nil, apierrors.NewNotFound(v1.Resource("virtualmachineinstances"), name)
}

// Handler serves a node's REST API over a Backend (in virt-handler, the
// nodeagent.Agent, served over TLS with ServingTLS). Pausing a VMI that
// does not run on the node is a 404 with the API's JSON error.
func Example() {
	srv := httptest.NewServer(restapi.Handler(emptyNode{}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+restapi.APIPrefix+"/namespaces/default/virtualmachineinstances/vm1/pause", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	fmt.Print(string(body))
	// Output:
	// 404 Not Found application/json
	// {"code":404,"message":"VirtualMachineInstance default/vm1 does not run on node node01"}
}
