package nodeagent

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"golang.org/x/net/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/nodeagent/launcher"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// APIPrefix is the path prefix of the per-VMI REST endpoints:
// <APIPrefix>/namespaces/{namespace}/virtualmachineinstances/{name}/<action>.
const APIPrefix = "/v1"

// Handler serves the agent's REST API, with KubeVirt virt-handler's paths
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
//	                  a port outside 1-65535, 409 "VMI has no IP address",
//	                  502 when the guest refuses (see portforward.go for
//	                  where the agent dials)
//
// The PUTs answer 200 with no body. The guest agent routes (freeze,
// unfreeze and the GETs) answer 409 "VMI does not have a guest agent
// connected" while the VMI's AgentConnected condition is not True or the
// agent does not answer; every route answers 409 for a VMI that is not
// Running. Only VMIs on this node are served (404 otherwise). Errors are
// {"code": ..., "message": ...}. Authentication is the server's business:
// cmd/virt-handler serves it over TLS with client certificates.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	p := APIPrefix + "/namespaces/{namespace}/virtualmachineinstances/{name}/"
	mux.HandleFunc("GET "+p+"console", a.serveConsole)
	mux.HandleFunc("GET "+p+"vnc", a.serveVNC)
	mux.HandleFunc("PUT "+p+"pause", a.serveLifecycle("pause"))
	mux.HandleFunc("PUT "+p+"unpause", a.serveLifecycle("unpause"))
	mux.HandleFunc("PUT "+p+"softreboot", a.serveSoftReboot)
	mux.HandleFunc("PUT "+p+"reset", a.serveReset)
	mux.HandleFunc("PUT "+p+"freeze", a.serveFreeze)
	mux.HandleFunc("PUT "+p+"unfreeze", a.serveUnfreeze)
	for _, q := range []string{"guestosinfo", "userlist", "filesystemlist"} {
		mux.HandleFunc("GET "+p+q, a.serveGuestAgent(q))
	}
	mux.HandleFunc("GET "+p+"portforward/{port}", a.servePortForward)
	mux.HandleFunc("GET "+p+"portforward/{port}/{protocol}", a.servePortForward)
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
func (a *Agent) vmiOf(w http.ResponseWriter, r *http.Request, ready func(*v1.VirtualMachineInstance) bool) (*v1.VirtualMachineInstance, *launcher.Client, bool) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	vmi, err := a.lister.VirtualMachineInstances(ns).Get(name)
	if err != nil || vmi.Status.NodeName != a.cfg.NodeName || vmi.Status.Phase != v1.Running || (ready != nil && !ready(vmi)) {
		// The cache lags the API server, the agent's own writes included: a
		// client that just saw the VMI Running (or its AgentConnected
		// condition) must not be refused because this agent's informer has
		// not caught up. Ask the API server before saying no.
		vmi, err = a.cfg.Client.KubevirtV1().VirtualMachineInstances(ns).Get(r.Context(), name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err) || (err == nil && vmi.Status.NodeName != a.cfg.NodeName):
		writeError(w, http.StatusNotFound, "VirtualMachineInstance "+ns+"/"+name+" does not run on node "+a.cfg.NodeName)
		return nil, nil, false
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil, nil, false
	case vmi.Status.Phase != v1.Running:
		writeError(w, http.StatusConflict, "VirtualMachineInstance "+ns+"/"+name+" is not running (phase "+string(vmi.Status.Phase)+")")
		return nil, nil, false
	}
	return vmi, a.client(vmi.UID), true
}

func (a *Agent) serveLifecycle(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vmi, c, ok := a.vmiOf(w, r, nil)
		if !ok {
			return
		}
		call := c.Pause
		if op == "unpause" {
			call = c.Unpause
		}
		if _, err := call(r.Context()); err != nil {
			a.metrics.launcherErrors.WithLabelValues(op).Inc()
			writeLauncherError(w, err)
			return
		}
		key, _ := cache.MetaNamespaceKeyFunc(vmi)
		a.queue.Add(key) // report the new state at once
		w.WriteHeader(http.StatusOK)
	}
}

func writeLauncherError(w http.ResponseWriter, err error) {
	var le *launcher.Error
	switch {
	case errors.As(err, &le) && le.Code == http.StatusConflict:
		writeError(w, http.StatusConflict, le.Message)
	case launcher.IsGone(err):
		writeError(w, http.StatusConflict, "the VMI's launcher is gone")
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// errNoGuestAgent is the REST API's answer for a VMI without a connected
// guest agent.
const errNoGuestAgent = "VMI does not have a guest agent connected"

// serveGuestAgent answers a guest agent query: guestosinfo, userlist or
// filesystemlist.
func (a *Agent) serveGuestAgent(query string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vmi, c, ok := a.vmiOf(w, r, agentConnected)
		if !ok {
			return
		}
		if !agentConnected(vmi) {
			writeError(w, http.StatusConflict, errNoGuestAgent)
			return
		}
		var (
			out any
			err error
		)
		switch query {
		case "guestosinfo":
			out, err = guestAgentQuery(r.Context(), c)
		case "userlist":
			var raw []byte
			if raw, err = c.GuestAgentCommand(r.Context(), "guest-get-users"); err == nil {
				var l v1.VirtualMachineInstanceGuestOSUserList
				l.Items, err = guestUsers(raw)
				out = l
			}
		case "filesystemlist":
			var raw []byte
			if raw, err = c.GuestAgentCommand(r.Context(), "guest-get-fsinfo"); err == nil {
				var l v1.VirtualMachineInstanceFileSystemList
				l.Items, err = guestFileSystems(raw)
				out = l
			}
		}
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
		case agentUnavailable(err):
			writeError(w, http.StatusConflict, errNoGuestAgent)
		default:
			a.metrics.launcherErrors.WithLabelValues("guestagent").Inc()
			writeLauncherError(w, err)
		}
	}
}

func (a *Agent) serveConsole(w http.ResponseWriter, r *http.Request) {
	_, c, ok := a.vmiOf(w, r, nil)
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

func (a *Agent) serveVNC(w http.ResponseWriter, r *http.Request) {
	_, c, ok := a.vmiOf(w, r, nil)
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
