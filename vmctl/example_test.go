package vmctl_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// A Subresources client changes VMs through the API server; the server's
// refusals keep their message and code.
func ExampleSubresources() {
	// A stand-in for the Kubernetes API server in front of virt-api.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println(r.Method, r.URL.Path, string(body))
		if strings.HasSuffix(r.URL.Path, "/start") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"VM is already running","reason":"Conflict","code":409}`)
		}
	}))
	defer api.Close()

	s, err := vmctl.NewSubresources(&rest.Config{Host: api.URL})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	err = s.Start(ctx, "default", "myvm", v1.StartOptions{})
	fmt.Println(apierrors.IsConflict(err), err)
	grace := int64(0)
	err = s.Stop(ctx, "default", "myvm", v1.StopOptions{GracePeriod: &grace})
	fmt.Println(err)
	// Output:
	// PUT /apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/myvm/start {}
	// true VM is already running
	// PUT /apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/myvm/stop {"gracePeriod":0}
	// <nil>
}

// Stream opens a VMI's console, VNC or port as a net.Conn.
func ExampleSubresources_Stream() {
	// A stand-in for virt-api's port-forward: it answers "pong" to "ping".
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Path)
		up := websocket.Upgrader{Subprotocols: []string{vmctl.PlainStreamProtocol}}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = ws.Close() }()
		if _, msg, err := ws.ReadMessage(); err == nil && string(msg) == "ping" {
			_ = ws.WriteMessage(websocket.BinaryMessage, []byte("pong"))
		}
	}))
	defer api.Close()

	s, err := vmctl.NewSubresources(&rest.Config{Host: api.URL})
	if err != nil {
		panic(err)
	}
	conn, err := s.Stream(context.Background(), "default", "myvmi", vmctl.PortForwardPath(8080, "tcp"))
	if err != nil {
		panic(err)
	}
	defer func() { _ = conn.Close() }()
	_, _ = conn.Write([]byte("ping"))
	reply, _ := io.ReadAll(conn)
	fmt.Println(string(reply))
	// Output:
	// /apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/myvmi/portforward/8080
	// pong
}

// NewCommand is all cmd/vmctl runs; options make it testable.
func ExampleNewCommand() {
	cmd := vmctl.NewCommand(vmctl.Options{
		Name:          "vmctl",
		Streams:       genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		ClientVersion: &vmctl.VersionInfo{GitVersion: "v1.0.0", Platform: "linux/amd64"},
	})
	cmd.SetArgs([]string{"version", "--client"})
	if err := cmd.Execute(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// Client Version: version.Info{GitVersion:"v1.0.0", GitCommit:"", GitTreeState:"", BuildDate:"", GoVersion:"", Compiler:"", Platform:"linux/amd64"}
}

// A kubectl plugin binary shows itself as kubectl's subcommand.
func ExampleProgramName() {
	fmt.Println(vmctl.ProgramName("/usr/local/bin/kubectl-vmctl"))
	fmt.Println(vmctl.ProgramName("/usr/local/bin/vmctl"))
	// Output:
	// kubectl-vmctl kubectl vmctl
	// vmctl vmctl
}
