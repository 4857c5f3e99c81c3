package webconsole_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/vmkit/vmkit/virtapi/webconsole"
)

// The page is mounted under a VMI's console subresource, behind whatever
// authorizes get on virtualmachineinstances/console (virt-api does).
func Example() {
	mux := http.NewServeMux()
	mux.Handle("GET /apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}/console/web/{file...}",
		webconsole.Handler(webconsole.Libraries()))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/_/console/web/app.js", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/javascript; charset=utf-8
}
