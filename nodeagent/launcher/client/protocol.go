package client

import (
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// StreamProtocol is the Upgrade token of the console and VNC streams.
const StreamProtocol = "vmkit-stream"

// ReasonAgentUnavailable marks an error body: no guest agent answered.
const ReasonAgentUnavailable = "AgentUnavailable"

// ReasonNotReady marks a Sync refused because a file the domain needs (a
// container disk, a kernel-boot file) is not in the pod yet (ErrNotReady).
const ReasonNotReady = "NotReady"

// ErrorBody is the body of a launcher's answer other than 200 OK.
type ErrorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
	Status Status `json:"status"`
}

// SoftRebootRequest is the body of PUT /v1/softreboot.
type SoftRebootRequest struct {
	// Method is how the guest is asked to restart.
	Method hypervisor.RebootMethod `json:"method"`
}
