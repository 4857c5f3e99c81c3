package restapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The REST API's answers for a soft reboot that cannot happen, KubeVirt's
// words.
const (
	errNoAgentNorACPI = "VMI neither have the agent connected nor the ACPI feature enabled"
	errPaused         = "VMI is paused"
)

// serveSoftReboot restarts the guest's OS, as KubeVirt does: through the
// QEMU guest agent while the VMI's AgentConnected condition is True, else
// with the ACPI power button, unless the VMI disables ACPI; never while
// the VMI is paused.
func (s *server) serveSoftReboot(w http.ResponseWriter, r *http.Request) {
	vmi, c, ok := s.vmiOf(w, r, agentConnected)
	if !ok {
		return
	}
	if paused(vmi) {
		writeError(w, http.StatusConflict, errPaused)
		return
	}
	method := hypervisor.RebootGuestAgent
	if !agentConnected(vmi) {
		if !acpiEnabled(vmi) {
			writeError(w, http.StatusConflict, errNoAgentNorACPI)
			return
		}
		method = hypervisor.RebootACPI
	}
	_, err := c.SoftReboot(r.Context(), method)
	switch {
	case err == nil:
	case errors.Is(err, hypervisor.ErrAgentUnavailable):
		writeError(w, http.StatusConflict, errNoGuestAgent)
		return
	default:
		s.b.CountLauncherError("softreboot")
		writeLauncherError(w, err)
		return
	}
	s.b.Eventf(vmi, corev1.EventTypeNormal, "SoftRebooted", "VirtualMachineInstance soft rebooted (%s)", method)
	w.WriteHeader(http.StatusOK)
}

// serveReset resets the guest at once, as KubeVirt's virt-handler does:
// without asking it, whatever its guest agent and ACPI, running or paused
// (a paused guest stays paused). It records KubeVirt's Normal event Reset.
func (s *server) serveReset(w http.ResponseWriter, r *http.Request) {
	vmi, c, ok := s.vmiOf(w, r, nil)
	if !ok {
		return
	}
	if _, err := c.Reset(r.Context()); err != nil {
		s.b.CountLauncherError("reset")
		writeLauncherError(w, err)
		return
	}
	s.b.Eventf(vmi, corev1.EventTypeNormal, "Reset", "VirtualMachineInstance reset")
	w.WriteHeader(http.StatusOK)
}

// serveFreeze freezes the guest's file systems through the guest agent;
// the optional body, KubeVirt's v1.FreezeUnfreezeTimeout, has the launcher
// thaw them after unfreezeTimeout unless an unfreeze comes first.
func (s *server) serveFreeze(w http.ResponseWriter, r *http.Request) {
	var body v1.FreezeUnfreezeTimeout
	if r.Body != nil { // nil only when the handler is called directly, not served
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "decoding the freeze request: "+err.Error())
			return
		}
	}
	var timeout time.Duration
	if body.UnfreezeTimeout != nil {
		timeout = body.UnfreezeTimeout.Duration
	}
	if timeout < 0 {
		writeError(w, http.StatusBadRequest, "unfreezeTimeout must not be negative")
		return
	}
	s.serveFSFreeze(w, r, "freeze", func(c *client.Client) error { _, err := c.Freeze(r.Context(), timeout); return err })
}

// serveUnfreeze thaws the guest's file systems and cancels the automatic
// thaw of a freeze.
func (s *server) serveUnfreeze(w http.ResponseWriter, r *http.Request) {
	s.serveFSFreeze(w, r, "unfreeze", func(c *client.Client) error { _, err := c.Unfreeze(r.Context()); return err })
}

// serveFSFreeze runs call, a freeze or unfreeze, on the launcher of a VMI
// whose guest agent is connected.
func (s *server) serveFSFreeze(w http.ResponseWriter, r *http.Request, op string, call func(*client.Client) error) {
	vmi, c, ok := s.vmiOf(w, r, agentConnected)
	if !ok {
		return
	}
	if !agentConnected(vmi) {
		writeError(w, http.StatusConflict, errNoGuestAgent)
		return
	}
	switch err := call(c); {
	case err == nil:
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, hypervisor.ErrAgentUnavailable):
		writeError(w, http.StatusConflict, errNoGuestAgent)
	default:
		s.b.CountLauncherError(op)
		writeLauncherError(w, err)
	}
}

// paused reports whether the VMI's Paused condition is True.
func paused(vmi *v1.VirtualMachineInstance) bool {
	c := vmi.VMICondition(v1.VirtualMachineInstancePaused)
	return c != nil && c.Status == corev1.ConditionTrue
}

// acpiEnabled reports whether the VMI's guest has ACPI: unless
// spec.domain.features.acpi.enabled is false.
func acpiEnabled(vmi *v1.VirtualMachineInstance) bool {
	f := vmi.Spec.Domain.Features
	return f == nil || f.ACPI.Enabled == nil || *f.ACPI.Enabled
}
