// Package restapi is the node agent's REST API: KubeVirt virt-handler's
// per-VMI endpoints, to which virt-api proxies the subresources of
// VirtualMachineInstances (virtctl console, vnc, port-forward, pause, ...).
// Handler serves them for the VMIs of one node, with KubeVirt's paths
// under <APIPrefix>/namespaces/{namespace}/virtualmachineinstances/{name}/:
//
//	GET .../console   the serial console as a WebSocket of binary messages
//	                  (?history=true first replays recent output)
//	GET .../vnc       the VNC server as a WebSocket of binary messages
//	PUT .../pause     pause the guest
//	PUT .../unpause   resume the guest
//	PUT .../softreboot
//	                  restart the guest's OS: through the QEMU guest agent
//	                  while AgentConnected is True, else with the ACPI power
//	                  button; 409 "VMI is paused", 409 "VMI neither have the
//	                  agent connected nor the ACPI feature enabled"
//	PUT .../reset     reset the guest at once (libvirt's virDomainReset):
//	                  it boots again in the same QEMU process; a paused
//	                  guest is reset and stays paused
//	PUT .../freeze    freeze the guest's file systems through the guest
//	                  agent; optional body {"unfreezeTimeout": "5m"}
//	                  (v1.FreezeUnfreezeTimeout): thaw them after that long
//	                  unless an unfreeze came first
//	PUT .../unfreeze  thaw them
//	GET .../guestosinfo, .../userlist, .../filesystemlist
//	                  what the QEMU guest agent reports, as KubeVirt's
//	                  VirtualMachineInstanceGuestAgentInfo,
//	                  VirtualMachineInstanceGuestOSUserList and
//	                  VirtualMachineInstanceFileSystemList
//	GET .../portforward/{port}, .../portforward/{port}/{protocol}
//	                  a WebSocket of binary messages carrying a connection
//	                  to the guest's port, tcp (the default) or udp; 400 for
//	                  a port outside 1-65535, 409 "VMI has no pod network
//	                  address", 502 when the guest refuses (see
//	                  portforward.go for where the agent dials)
//
// The PUTs answer 200 with no body. The guest agent routes (freeze,
// unfreeze and the GETs) answer 409 "VMI does not have a guest agent
// connected" while the VMI's AgentConnected condition is not True or the
// agent does not answer; every route answers 409 for a VMI that is not
// Running. Only VMIs on the Backend's node are served (404 otherwise).
// Errors are {"code": ..., "message": ...}.
//
// The API carries out each request through the VMI's launcher; what it
// needs of the node agent (the VMIs of its node, their launchers, the pod
// network it wired, its events and metrics) is a Backend, which
// nodeagent.Agent implements.
//
// Authentication is the server's business, not Handler's: cmd/virt-handler
// serves the API over TLS (ServingTLS) and accepts only client
// certificates of the installation's CA with KubeVirt's virt-handler
// client name (installstrategy.HandlerClientCommonName), which only
// virt-api holds. ClientTLS is the client side of the same certificates,
// with which a node agent's migration proxy connects to another's.
package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"golang.org/x/net/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// APIPrefix is the path prefix of the per-VMI REST endpoints:
// <APIPrefix>/namespaces/{namespace}/virtualmachineinstances/{name}/<action>.
const APIPrefix = "/v1"

// Handler serves the REST API (see the package documentation) for the
// VMIs of b's node.
func Handler(b Backend) http.Handler { return (&server{b: b}).routes() }

// server serves the REST API over a Backend.
type server struct {
	b Backend
	// netNS finds a launcher's PID and network namespace (launcherNetNS
	// when nil; tests put a namespace of their own there).
	netNS func(context.Context, *client.Client) (int, string, error)
}

// routes is the API's route table.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	p := APIPrefix + "/namespaces/{namespace}/virtualmachineinstances/{name}/"
	mux.HandleFunc("GET "+p+"console", s.serveConsole)
	mux.HandleFunc("GET "+p+"vnc", s.serveVNC)
	mux.HandleFunc("PUT "+p+"pause", s.serveLifecycle("pause"))
	mux.HandleFunc("PUT "+p+"unpause", s.serveLifecycle("unpause"))
	mux.HandleFunc("PUT "+p+"softreboot", s.serveSoftReboot)
	mux.HandleFunc("PUT "+p+"reset", s.serveReset)
	mux.HandleFunc("PUT "+p+"freeze", s.serveFreeze)
	mux.HandleFunc("PUT "+p+"unfreeze", s.serveUnfreeze)
	for _, q := range []string{"guestosinfo", "userlist", "filesystemlist"} {
		mux.HandleFunc("GET "+p+q, s.serveGuestAgent(q))
	}
	mux.HandleFunc("GET "+p+"portforward/{port}", s.servePortForward)
	mux.HandleFunc("GET "+p+"portforward/{port}/{protocol}", s.servePortForward)
	return mux
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apiError{Code: code, Message: msg})
}

// vmiOf returns the running VMI the request names and its launcher client,
// or writes the error.
//
// ready, when not nil, is a further condition the request needs (the guest
// agent connected); a cached VMI that fails it is read again from the API
// server, as one that is not Running is.
func (s *server) vmiOf(w http.ResponseWriter, r *http.Request, ready func(*v1.VirtualMachineInstance) bool) (*v1.VirtualMachineInstance, *client.Client, bool) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	node := s.b.NodeName()
	vmi, err := s.b.CachedVMI(ns, name)
	if err != nil || vmi.Status.NodeName != node || vmi.Status.Phase != v1.Running || (ready != nil && !ready(vmi)) {
		// The cache lags the API server, the agent's own writes included: a
		// client that just saw the VMI Running (or its AgentConnected
		// condition) must not be refused because this agent's informer has
		// not caught up. Ask the API server before saying no.
		vmi, err = s.b.FreshVMI(r.Context(), ns, name)
	}
	switch {
	case apierrors.IsNotFound(err) || (err == nil && vmi.Status.NodeName != node):
		writeError(w, http.StatusNotFound, "VirtualMachineInstance "+ns+"/"+name+" does not run on node "+node)
		return nil, nil, false
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil, nil, false
	case vmi.Status.Phase != v1.Running:
		writeError(w, http.StatusConflict, "VirtualMachineInstance "+ns+"/"+name+" is not running (phase "+string(vmi.Status.Phase)+")")
		return nil, nil, false
	}
	return vmi, s.b.Launcher(vmi.UID), true
}

func (s *server) serveLifecycle(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vmi, c, ok := s.vmiOf(w, r, nil)
		if !ok {
			return
		}
		call := c.Pause
		if op == "unpause" {
			call = c.Unpause
		}
		if _, err := call(r.Context()); err != nil {
			s.b.CountLauncherError(op)
			writeLauncherError(w, err)
			return
		}
		s.b.Enqueue(vmi) // report the new state at once
		w.WriteHeader(http.StatusOK)
	}
}

func writeLauncherError(w http.ResponseWriter, err error) {
	var le *client.Error
	switch {
	case errors.As(err, &le) && le.Code == http.StatusConflict:
		writeError(w, http.StatusConflict, le.Message)
	case client.IsGone(err):
		writeError(w, http.StatusConflict, "the VMI's launcher is gone")
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *server) serveConsole(w http.ResponseWriter, r *http.Request) {
	_, c, ok := s.vmiOf(w, r, nil)
	if !ok {
		return
	}
	history, _ := strconv.ParseBool(r.URL.Query().Get("history"))
	stream, err := c.Console(r.Context(), history)
	if err != nil {
		writeLauncherError(w, err)
		return
	}
	serveStream(w, r, stream)
}

func (s *server) serveVNC(w http.ResponseWriter, r *http.Request) {
	_, c, ok := s.vmiOf(w, r, nil)
	if !ok {
		return
	}
	stream, err := c.VNC(r.Context())
	if err != nil {
		writeLauncherError(w, err)
		return
	}
	serveStream(w, r, stream)
}

// serveStream upgrades to a WebSocket and copies stream to it as binary
// messages and the client's messages to stream, until either side ends.
func serveStream(w http.ResponseWriter, r *http.Request, stream io.ReadWriteCloser) {
	defer stream.Close()
	websocket.Server{
		// The server authenticates clients (TLS client certificates); any
		// origin is fine.
		Handshake: func(*websocket.Config, *http.Request) error { return nil },
		Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(stream, ws); done <- struct{}{} }()
			go func() { _, _ = io.Copy(ws, stream); done <- struct{}{} }()
			<-done
			_ = ws.Close()
			_ = stream.Close()
		},
	}.ServeHTTP(w, r)
}
