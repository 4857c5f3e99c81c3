package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// The node agent reaches the launcher of a VMI at its socket under the
// share directory. Here a stand-in answers the state call the way a
// launcher does; a real one is nodeagent/launcher's Launcher.Handler.
func Example() {
	share, _ := os.MkdirTemp("", "client-example")
	defer os.RemoveAll(share)
	const uid = "6f1f6c1e-0000-4000-8000-000000000001"
	sock := client.SocketPath(share, uid)
	_ = os.MkdirAll(filepath.Dir(sock), 0o750)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(client.Status{UID: uid, Domain: "default_demo", Defined: true, Started: true, State: hypervisor.StateRunning})
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	c := client.New(sock)
	defer c.Close()
	st, err := c.State(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Domain, st.State, st.Succeeded())

	// A socket nobody listens on any more: the launcher is gone.
	_, err = client.New(client.SocketPath(share, "another-uid")).State(context.Background())
	fmt.Println(client.IsGone(err))
	// Output:
	// default_demo Running false
	// true
}
