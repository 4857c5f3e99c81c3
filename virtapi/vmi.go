package virtapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// StreamProtocol is the WebSocket subprotocol of console, VNC and
// port-forward streams: raw bytes in binary messages, as KubeVirt's.
const StreamProtocol = "plain.kubevirt.io"

// handlerPrefix is the node agent's path of a VMI's subresources.
func handlerPath(vmi *v1.VirtualMachineInstance, sub string) string {
	return "/v1/namespaces/" + url.PathEscape(vmi.Namespace) + "/virtualmachineinstances/" + url.PathEscape(vmi.Name) + "/" + sub
}

// runningVMI reads the VMI and runs check on it.
func (s *Server) runningVMI(ctx context.Context, ns, name string, check func(*v1.VirtualMachineInstance) error) (*v1.VirtualMachineInstance, error) {
	vmi, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(vmi); err != nil {
			return nil, err
		}
	}
	if vmi.Status.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to connect to VirtualMachineInstance because phase is %s instead of %s", vmi.Status.Phase, v1.Running))
	}
	return vmi, nil
}

func isRunning(msg string) func(*v1.VirtualMachineInstance) error {
	return func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Running {
			return conflict(vmiResource, vmi.Name, "%s", msg)
		}
		return nil
	}
}

func hasCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) bool {
	c := vmi.VMICondition(t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// forward sends method sub to the node agent of the VMI's node and relays
// its answer: the body on success, a metav1.Status with the agent's code
// and message on failure.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, vmi *v1.VirtualMachineInstance, method, sub string, body []byte) {
	base, tlsConfig, err := s.cfg.Handlers.Handler(r.Context(), vmi.Status.NodeName)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), method, base+handlerPath(vmi, sub), bytes.NewReader(body))
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("node agent on %s: %w", vmi.Status.NodeName, err)))
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("node agent on %s: %w", vmi.Status.NodeName, err)))
		return
	}
	if resp.StatusCode >= 300 {
		writeStatus(w, agentError(resp.StatusCode, out))
		return
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// agentError turns the node agent's {code, message} answer into a status
// error with the same code and message.
func agentError(code int, body []byte) error {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
	}
	reason := metav1.StatusReasonInternalError
	switch code {
	case http.StatusBadRequest:
		reason = metav1.StatusReasonBadRequest
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	case http.StatusConflict:
		reason = metav1.StatusReasonConflict
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		reason = metav1.StatusReasonServiceUnavailable
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: e.Message}}
}

func dryRunAll(dryRun []string) bool { return len(dryRun) > 0 && dryRun[0] == metav1.DryRunAll }

// vmiPut serves PUT on a running VMI's subresource sub: check, then the
// node agent does it. A body with dryRun ["All"] (KubeVirt's PauseOptions
// and UnpauseOptions) stops after the check.
func (s *Server) vmiPut(sub string, check func(*v1.VirtualMachineInstance) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var opts struct {
			DryRun []string `json:"dryRun"`
		}
		if !decodeBody(w, r, &opts) {
			return
		}
		vmi, err := s.runningVMI(r.Context(), r.PathValue("namespace"), r.PathValue("name"), check)
		if err != nil {
			writeStatus(w, err)
			return
		}
		if dryRunAll(opts.DryRun) {
			w.WriteHeader(http.StatusOK)
			return
		}
		s.forward(w, r, vmi, http.MethodPut, sub, nil)
	}
}

// KubeVirt's checks before pause, unpause, soft reboot and reset, with its
// messages.
func checkPause(vmi *v1.VirtualMachineInstance) error {
	switch {
	case vmi.Status.Phase != v1.Running:
		return conflict(vmiResource, vmi.Name, msgVMNotRunning)
	case hasCondition(vmi, v1.VirtualMachineInstancePaused):
		return conflict(vmiResource, vmi.Name, msgAlreadyPaused)
	case vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed:
		return conflict(vmiResource, vmi.Name, "Cannot pause VM '%s' because it is currently being migrated", vmi.Name)
	}
	return nil
}

func checkUnpause(vmi *v1.VirtualMachineInstance) error {
	switch {
	case vmi.Status.Phase != v1.Running:
		return conflict(vmiResource, vmi.Name, msgVMINotRunning)
	case !hasCondition(vmi, v1.VirtualMachineInstancePaused):
		return conflict(vmiResource, vmi.Name, msgVMINotPaused)
	}
	return nil
}

func checkSoftReboot(vmi *v1.VirtualMachineInstance) error {
	switch {
	case vmi.Status.Phase != v1.Running:
		return conflict(vmiResource, vmi.Name, msgVMNotRunning)
	case hasCondition(vmi, v1.VirtualMachineInstancePaused):
		return conflict(vmiResource, vmi.Name, "VMI is paused")
	}
	return nil
}

// checkReset is KubeVirt's answer to a reset of a VMI that is neither
// Running nor Scheduled: 400 with its message (KubeVirt has no check of its
// own for reset; its connection to virt-handler refuses). A Scheduled VMI
// goes to the node agent, which answers 409 unless it runs by then. The
// Status's details name the VMI.
func checkReset(vmi *v1.VirtualMachineInstance) error {
	if vmi.Status.Phase == v1.Running || vmi.Status.Phase == v1.Scheduled {
		return nil
	}
	err := apierrors.NewBadRequest(fmt.Sprintf("Failed to reset non-running VMI with phase %s: Unable to connect to VirtualMachineInstance because phase is %s instead of %s or %s",
		vmi.Status.Phase, vmi.Status.Phase, v1.Running, v1.Scheduled))
	err.ErrStatus.Details = &metav1.StatusDetails{Name: vmi.Name, Group: vmiResource.Group, Kind: vmiResource.Resource}
	return err
}

func (s *Server) freezeVMI(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if op == "freeze" {
			var opts v1.FreezeUnfreezeTimeout
			if !decodeBody(w, r, &opts) {
				return
			}
			if opts.UnfreezeTimeout != nil && opts.UnfreezeTimeout.Duration < 0 {
				writeStatus(w, apierrors.NewBadRequest("unfreezeTimeout must not be negative"))
				return
			}
			body, _ = json.Marshal(opts)
		}
		msg := msgVMNotRunning
		if op == "unfreeze" {
			msg = msgVMINotRunning
		}
		vmi, err := s.runningVMI(r.Context(), r.PathValue("namespace"), r.PathValue("name"), isRunning(msg))
		if err != nil {
			writeStatus(w, err)
			return
		}
		s.forward(w, r, vmi, http.MethodPut, op, body)
	}
}

func (s *Server) guestInfo(query string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vmi, err := s.runningVMI(r.Context(), r.PathValue("namespace"), r.PathValue("name"), func(vmi *v1.VirtualMachineInstance) error {
			switch {
			case vmi.Status.Phase != v1.Running:
				return conflict(vmiResource, vmi.Name, msgVMINotRunning)
			case !hasCondition(vmi, v1.VirtualMachineInstanceAgentConnected):
				return conflict(vmiResource, vmi.Name, "VMI does not have guest agent connected")
			}
			return nil
		})
		if err != nil {
			writeStatus(w, err)
			return
		}
		s.forward(w, r, vmi, http.MethodGet, query, nil)
	}
}

// stream proxies a console, VNC or port-forward WebSocket to the node
// agent: it connects to the agent first, so a refusal reaches the client as
// an HTTP error, then upgrades the client's connection and copies bytes
// both ways until either side closes.
func (s *Server) stream(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vmi, err := s.runningVMI(r.Context(), r.PathValue("namespace"), r.PathValue("name"), func(vmi *v1.VirtualMachineInstance) error {
			if vmi.Status.Phase != v1.Running {
				return apierrors.NewBadRequest(fmt.Sprintf("Unable to connect to VirtualMachineInstance because phase is %s instead of %s", vmi.Status.Phase, v1.Running))
			}
			return nil
		})
		if err != nil {
			writeStatus(w, err)
			return
		}
		sub := kind
		if kind == "portforward" {
			if err := checkPort(r.PathValue("port"), r.PathValue("protocol")); err != nil {
				writeStatus(w, err)
				return
			}
			sub += "/" + url.PathEscape(r.PathValue("port"))
			if p := r.PathValue("protocol"); p != "" {
				sub += "/" + url.PathEscape(p)
			}
		}
		if r.URL.RawQuery != "" {
			sub += "?" + r.URL.RawQuery
		}
		agent, err := s.dialAgent(r.Context(), vmi, sub)
		if err != nil {
			writeStatus(w, err)
			return
		}
		defer agent.Close()
		websocket.Server{
			Handshake: func(c *websocket.Config, _ *http.Request) error {
				// Answer with KubeVirt's subprotocol when the client asks
				// for it; a client that asks for none gets none.
				for _, p := range c.Protocol {
					if p == StreamProtocol {
						c.Protocol = []string{StreamProtocol}
						return nil
					}
				}
				c.Protocol = nil
				return nil
			},
			Handler: func(client *websocket.Conn) {
				client.PayloadType = websocket.BinaryFrame
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(agent, client); done <- struct{}{} }()
				go func() { _, _ = io.Copy(client, agent); done <- struct{}{} }()
				<-done
				_ = client.Close()
				_ = agent.Close()
			},
		}.ServeHTTP(w, r)
	}
}

// dialAgent opens the node agent's WebSocket for sub.
func (s *Server) dialAgent(ctx context.Context, vmi *v1.VirtualMachineInstance, sub string) (*websocket.Conn, error) {
	base, tlsConfig, err := s.cfg.Handlers.Handler(ctx, vmi.Status.NodeName)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	u := "wss://" + strings.TrimPrefix(base, "https://") + handlerPath(vmi, sub)
	cfg, err := websocket.NewConfig(u, "https://virt-api/")
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	cfg.TlsConfig = tlsConfig
	ws, err := cfg.DialContext(ctx)
	if de := (*websocket.DialError)(nil); errors.As(err, &de) && de.Err == websocket.ErrBadStatus {
		// The agent refused before upgrading (a VMI without a pod network
		// address, a port out of range): x/net/websocket keeps no answer,
		// so ask again without the upgrade to pass its code and message on.
		if refusal := agentRefusal(ctx, base+handlerPath(vmi, sub), tlsConfig); refusal != nil {
			return nil, refusal
		}
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("opening %s of VirtualMachineInstance %s/%s on the node agent of %s: %w", sub, vmi.Namespace, vmi.Name, vmi.Status.NodeName, err))
	}
	ws.PayloadType = websocket.BinaryFrame
	return ws, nil
}

// agentRefusal GETs a stream's URL as a plain request and returns the
// agent's error answer, nil when there is none to pass on.
func agentRefusal(ctx context.Context, u string, tlsConfig *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 400 {
		return nil
	}
	return agentError(resp.StatusCode, body)
}

// checkPort validates a port-forward's port and protocol.
func checkPort(port, protocol string) error {
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return apierrors.NewBadRequest(fmt.Sprintf("portforward: port %q is not a number from 1 to 65535", port))
	}
	if protocol != "" && protocol != "tcp" && protocol != "udp" {
		return apierrors.NewBadRequest(fmt.Sprintf("portforward: protocol %q is not tcp or udp", protocol))
	}
	return nil
}
