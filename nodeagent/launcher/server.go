package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/console"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Handler serves the command socket protocol (see package
// nodeagent/launcher/client).
func (l *Launcher) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"uid": l.cfg.UID})
	})
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Status())
	})
	mux.HandleFunc("PUT /v1/sync", func(w http.ResponseWriter, r *http.Request) {
		var vmi v1.VirtualMachineInstance
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&vmi); err != nil {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "decoding the VMI: " + err.Error(), Status: l.Status()})
			return
		}
		st, err := l.Sync(r.Context(), &vmi)
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/network", func(w http.ResponseWriter, r *http.Request) {
		var ifaces []client.NetworkInterface
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ifaces); err != nil {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "decoding the network configuration: " + err.Error(), Status: l.Status()})
			return
		}
		st, err := l.ConfigureNetwork(r.Context(), ifaces)
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/shutdown", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Shutdown(r.Context()))
	})
	mux.HandleFunc("PUT /v1/kill", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Kill(r.Context()))
	})
	mux.HandleFunc("PUT /v1/pause", func(w http.ResponseWriter, r *http.Request) {
		st, err := l.Pause(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/unpause", func(w http.ResponseWriter, r *http.Request) {
		st, err := l.Unpause(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/reset", func(w http.ResponseWriter, r *http.Request) {
		st, err := l.Reset(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/softreboot", func(w http.ResponseWriter, r *http.Request) {
		var req client.SoftRebootRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "decoding the soft reboot request: " + err.Error(), Status: l.Status()})
			return
		}
		st, err := l.SoftReboot(r.Context(), req.Method)
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/freeze", func(w http.ResponseWriter, r *http.Request) {
		var req v1.FreezeUnfreezeTimeout
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "decoding the freeze request: " + err.Error(), Status: l.Status()})
			return
		}
		var timeout time.Duration
		if req.UnfreezeTimeout != nil {
			timeout = req.UnfreezeTimeout.Duration
		}
		if timeout < 0 {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "unfreezeTimeout must not be negative", Status: l.Status()})
			return
		}
		st, err := l.Freeze(r.Context(), timeout)
		reply(w, st, err)
	})
	mux.HandleFunc("PUT /v1/unfreeze", func(w http.ResponseWriter, r *http.Request) {
		st, err := l.Unfreeze(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("GET /v1/stats", l.serveStats)
	mux.HandleFunc("GET /v1/guest-agent/{command}", l.serveGuestAgent)
	mux.HandleFunc("GET /v1/probe/{kind}", l.serveProbe)
	mux.HandleFunc("GET /v1/console", l.serveConsole)
	mux.HandleFunc("GET /v1/vnc", l.serveVNC)
	l.migrationHandlers(mux)
	return mux
}

func reply(w http.ResponseWriter, st client.Status, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, st)
	case errors.Is(err, errUnknownRebootMethod):
		writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: err.Error(), Status: st})
	case errors.Is(err, client.ErrNotReady):
		writeJSON(w, http.StatusServiceUnavailable, client.ErrorBody{Error: err.Error(), Reason: client.ReasonNotReady, Status: st})
	case errors.Is(err, hypervisor.ErrAgentUnavailable):
		writeJSON(w, http.StatusConflict, client.ErrorBody{Error: err.Error(), Reason: client.ReasonAgentUnavailable, Status: st})
	case errors.Is(err, errFinal) || errors.Is(err, hypervisor.ErrInvalidState):
		writeJSON(w, http.StatusConflict, client.ErrorBody{Error: err.Error(), Status: st})
	default:
		writeJSON(w, http.StatusInternalServerError, client.ErrorBody{Error: err.Error(), Status: st})
	}
}

// serveGuestAgent runs an allowed guest agent command and answers with the
// agent's return value.
func (l *Launcher) serveGuestAgent(w http.ResponseWriter, r *http.Request) {
	out, err := l.GuestAgentCommand(r.Context(), r.PathValue("command"))
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	case errors.Is(err, errNotAllowed):
		writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: err.Error(), Status: l.Status()})
	default:
		reply(w, l.Status(), err)
	}
}

// serveProbe runs one of the VMI's probes (see Launcher.Probe) and answers
// with its ProbeResult.
func (l *Launcher) serveProbe(w http.ResponseWriter, r *http.Request) {
	timeout := time.Second
	if v := r.URL.Query().Get("timeoutSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "timeoutSeconds: want a number of seconds, got " + strconv.Quote(v), Status: l.Status()})
			return
		}
		timeout = time.Duration(n) * time.Second
	}
	res, err := l.Probe(r.Context(), client.ProbeKind(r.PathValue("kind")), timeout)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: err.Error(), Status: l.Status()})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// upgrade switches the connection to a raw byte stream.
func upgrade(w http.ResponseWriter, r *http.Request) (net.Conn, *bufio.ReadWriter, bool) {
	if r.Header.Get("Upgrade") != client.StreamProtocol {
		http.Error(w, "expected Upgrade: "+client.StreamProtocol, http.StatusBadRequest)
		return nil, nil, false
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot hijack the connection", http.StatusInternalServerError)
		return nil, nil, false
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, false
	}
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + client.StreamProtocol + "\r\n\r\n")
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, nil, false
	}
	return conn, rw, true
}

// serveConsole streams the serial console: the history when asked for,
// then live output; what the client sends is typed into the guest.
func (l *Launcher) serveConsole(w http.ResponseWriter, r *http.Request) {
	if !l.console.Attached() {
		writeJSON(w, http.StatusConflict, client.ErrorBody{Error: console.ErrNotAttached.Error(), Status: l.Status()})
		return
	}
	history, _ := strconv.ParseBool(r.URL.Query().Get("history"))
	conn, rw, ok := upgrade(w, r)
	if !ok {
		return
	}
	defer conn.Close()
	past, sub, cancel := l.console.Subscribe(history)
	defer cancel()
	go func() {
		// Client → guest; a closed client ends the session.
		buf := make([]byte, 1024)
		for {
			n, err := rw.Read(buf)
			if n > 0 {
				_, _ = l.console.Write(buf[:n])
			}
			if err != nil {
				cancel()
				return
			}
		}
	}()
	if len(past) > 0 {
		if _, err := conn.Write(past); err != nil {
			return
		}
	}
	for {
		p, ok := sub.Next()
		if !ok {
			return
		}
		if _, err := conn.Write(p); err != nil {
			return
		}
	}
}

// vncSocket is the VNC socket of the defined domain, "" before.
func (l *Launcher) vncSocket() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.domain == "" || l.final != nil {
		return ""
	}
	return l.opts.VNCSocket
}

// serveVNC splices the client to the domain's VNC socket.
func (l *Launcher) serveVNC(w http.ResponseWriter, r *http.Request) {
	path := l.vncSocket()
	if path == "" {
		writeJSON(w, http.StatusConflict, client.ErrorBody{Error: "the domain has no VNC server", Status: l.Status()})
		return
	}
	vnc, err := net.Dial("unix", path)
	if err != nil {
		writeJSON(w, http.StatusConflict, client.ErrorBody{Error: "connecting to VNC: " + err.Error(), Status: l.Status()})
		return
	}
	defer vnc.Close()
	conn, rw, ok := upgrade(w, r)
	if !ok {
		return
	}
	defer conn.Close()
	splice(vnc, struct {
		io.Reader
		io.Writer
	}{rw, conn})
}

// splice copies both ways until either side ends.
func splice(a, b io.ReadWriter) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
}
