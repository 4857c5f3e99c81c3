package nodeagent

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Reasons the agent gives on Failed VMIs and conditions.
const (
	// ReasonGuestCrashed: the domain crashed.
	ReasonGuestCrashed = "GuestCrashed"
	// ReasonDomainDestroyed: the domain was destroyed without a request.
	ReasonDomainDestroyed = "DomainDestroyed"
	// ReasonDomainFailed: the domain ended for another reason, or never started.
	ReasonDomainFailed = "DomainFailed"
	// ReasonLibvirtUnavailable: the launcher's libvirt stayed unavailable
	// past its timeout and the launcher killed the guest.
	ReasonLibvirtUnavailable = "LibvirtUnavailable"
	// ReasonLauncherExited: the launcher is gone without reporting how the
	// domain ended (killed, crashed, or its pod was removed).
	ReasonLauncherExited = "LauncherExited"
	// ReasonLauncherTerminated: the kubelet stopped the launcher of a VMI
	// nobody asked to stop (its pod was deleted or evicted, or its liveness
	// probe failed), and the launcher stopped the guest.
	ReasonLauncherTerminated = "LauncherTerminated"
	// ReasonPausedByUser and ReasonPausedIOError are the Paused condition's
	// reasons, as KubeVirt's: paused through the pause subresource, or by
	// QEMU on a disk I/O error (the domains' error_policy is stop: a full
	// disk, or lost storage), when libvirt's paused reason is ioerror.
	ReasonPausedByUser  = "PausedByUser"
	ReasonPausedIOError = "PausedIOError"
	// ReasonIOErrorEvent is the reason of KubeVirt's Warning event on a VMI
	// whose guest an I/O error paused (KubeVirt's spelling).
	ReasonIOErrorEvent = "IOerror"
	// ReasonAccessCredentialsSyncSuccess and ReasonAccessCredentialsSyncFailed
	// are KubeVirt's event reasons for the AccessCredentialsSynchronized
	// condition, which vmkit also gives the condition.
	ReasonAccessCredentialsSyncSuccess = "AccessCredentialsSyncSuccess"
	ReasonAccessCredentialsSyncFailed  = "AccessCredentialsSyncFailed"
)

// observation is what a sync learned about the VMI's launcher.
type observation struct {
	now time.Time
	// launcher is the launcher's status (its final status when it ended).
	launcher *client.Status
	// launcherGone: no launcher answers and none left a final status.
	launcherGone bool
	// agent is what the last poll of the QEMU guest agent found; nil when
	// none ended yet, which changes nothing.
	agent *guestAgentInfo
	// network is what the agent wired on the pod network; nil when it
	// wired nothing (the stored interfaces are kept).
	network []network.Result
	// networkErr: the interfaces cannot be wired; the VMI fails.
	networkErr error
	// hotplug is what the sync found of hotplugged volumes; nil when it
	// did not look (their stored status is kept).
	hotplug *hotplugState
}

// calculateStatus is the VMI's status given what the launcher and the guest
// agent reported. It only changes the phase, the reason, the Paused
// (PausedByUser or PausedIOError), AgentConnected and
// AccessCredentialsSynchronized conditions, guestOSInfo and interfaces; the
// Ready condition belongs to the VMI controller. It is pure: sync writes
// the result only when it differs.
func calculateStatus(vmi *v1.VirtualMachineInstance, obs observation) v1.VirtualMachineInstanceStatus {
	s := *vmi.Status.DeepCopy()
	if vmi.IsFinal() {
		return s
	}
	now := metav1.NewTime(obs.now.Truncate(1e9))
	enter := func(p v1.VirtualMachineInstancePhase, reason string) {
		if s.Phase == p {
			return
		}
		s.Phase, s.Reason = p, reason
		s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
	}
	st := obs.launcher
	switch {
	case obs.networkErr != nil:
		enter(v1.Failed, ReasonNetworkSetupFailed)
		setCondition(&s, v1.VirtualMachineInstanceCondition{
			Type: v1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
			Reason: ReasonNetworkSetupFailed, Message: obs.networkErr.Error(),
		}, now)
	case obs.launcherGone:
		enter(v1.Failed, ReasonLauncherExited)
	case st == nil:
	case st.Final:
		switch {
		case st.Terminated && vmi.DeletionTimestamp == nil:
			// A clean stop, but not one anybody asked for: a failed
			// liveness probe ends the VMI as failed, as KubeVirt's.
			enter(v1.Failed, ReasonLauncherTerminated)
		case st.Succeeded():
			enter(v1.Succeeded, "")
		default:
			enter(v1.Failed, failureReason(st))
		}
	case st.Started && running(st.State):
		enter(v1.Running, "")
	}
	if c := pausedCondition(st); c != nil && s.Phase == v1.Running {
		setCondition(&s, *c, now)
	} else {
		removeCondition(&s, v1.VirtualMachineInstancePaused)
	}
	if ga := obs.agent; ga != nil && s.Phase == v1.Running {
		applyGuestAgent(&s, ga, now)
	}
	if st != nil && st.AccessCredentials != nil && s.Phase == v1.Running {
		c := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceAccessCredentialsSynchronized,
			Status: corev1.ConditionTrue, Reason: ReasonAccessCredentialsSyncSuccess}
		if !st.AccessCredentials.Succeeded {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, ReasonAccessCredentialsSyncFailed, st.AccessCredentials.Message
		}
		setCondition(&s, c, now)
	}
	if st != nil && st.CPUTopology != nil && s.Phase == v1.Running {
		// The guest's CPUs now, hot-plugged sockets included (KubeVirt's).
		t := *st.CPUTopology
		s.CurrentCPUTopology = &t
	}
	if st != nil && st.Memory != nil && st.Memory.GuestCurrent != nil && s.Phase == v1.Running && s.Memory != nil {
		// The memory the guest has now, hot-plugged memory included.
		cur := st.Memory.GuestCurrent.DeepCopy()
		s.Memory.GuestCurrent = &cur
	}
	if obs.hotplug != nil && s.Phase == v1.Running {
		applyHotplugVolumes(&s, vmi, st, obs.hotplug)
	}
	if obs.network != nil && s.Phase == v1.Running {
		if ga := obs.agent; ga != nil && ga.connected && ga.interfaces != nil {
			s.Interfaces = networkInterfaces(obs.network, ga.interfaces)
		} else if !hasWired(s.Interfaces) {
			s.Interfaces = networkInterfaces(obs.network, s.Interfaces)
		}
	}
	if s.Phase == v1.Succeeded || s.Phase == v1.Failed {
		removeCondition(&s, v1.VirtualMachineInstancePaused)
		removeCondition(&s, v1.VirtualMachineInstanceAgentConnected)
	}
	return s
}

// pausedCondition is the Paused condition for a live domain paused by the
// user or by an I/O error, as KubeVirt's virt-handler sets it; nil for a
// domain that is not paused, or paused for another reason (a migration's
// switch-over, a snapshot), which KubeVirt does not report either.
func pausedCondition(st *client.Status) *v1.VirtualMachineInstanceCondition {
	if st == nil || st.Final || st.State != hypervisor.StatePaused {
		return nil
	}
	c := &v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}
	switch st.Reason {
	case hypervisor.ReasonUser:
		c.Reason, c.Message = ReasonPausedByUser, "VMI was paused by user"
	case hypervisor.ReasonIOError:
		c.Reason, c.Message = ReasonPausedIOError, "VMI was paused, low-level IO error detected"
	default:
		return nil
	}
	return c
}

// ioErrorEvent records KubeVirt's Warning IOerror event when status, just
// written, is the first to say that an I/O error paused the guest. The
// guest stays paused until it is unpaused (virtctl unpause), which retries
// the failed I/O: make room on the disk or restore its storage first.
func (a *Agent) ioErrorEvent(vmi *v1.VirtualMachineInstance, status *v1.VirtualMachineInstanceStatus) {
	if pausedBy(status) != ReasonPausedIOError || pausedBy(&vmi.Status) == ReasonPausedIOError {
		return
	}
	a.recorder.Event(vmi, corev1.EventTypeWarning, ReasonIOErrorEvent,
		"VM Paused due to IO error: a disk is full or its storage failed; unpause the VMI once it is fixed")
}

// pausedBy is the reason of a status's Paused condition when it is True.
func pausedBy(s *v1.VirtualMachineInstanceStatus) string {
	for _, c := range s.Conditions {
		if c.Type == v1.VirtualMachineInstancePaused && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

// applyGuestAgent sets AgentConnected (True, as KubeVirt's, without a
// reason) while the guest agent answers and removes it when it stops;
// guestOSInfo and the interfaces are what the agent last reported, kept
// when it stops answering.
func applyGuestAgent(s *v1.VirtualMachineInstanceStatus, ga *guestAgentInfo, now metav1.Time) {
	if !ga.connected {
		removeCondition(s, v1.VirtualMachineInstanceAgentConnected)
		return
	}
	setCondition(s, v1.VirtualMachineInstanceCondition{
		Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue,
	}, now)
	if ga.os != (v1.VirtualMachineInstanceGuestOSInfo{}) {
		s.GuestOSInfo = ga.os
	}
	if ga.interfaces != nil {
		s.Interfaces = nil
		if len(ga.interfaces) > 0 {
			s.Interfaces = append([]v1.VirtualMachineInstanceNetworkInterface(nil), ga.interfaces...)
		}
	}
}

// running reports whether a domain in this state has a guest that runs
// (paused, by the user or by an I/O error, counts; shut off or crashed
// does not).
func running(st hypervisor.State) bool {
	switch st {
	case hypervisor.StateRunning, hypervisor.StateBlocked, hypervisor.StatePaused, hypervisor.StateShuttingDown, hypervisor.StatePMSuspended:
		return true
	}
	return false
}

func failureReason(st *client.Status) string {
	switch {
	case st.State == hypervisor.StateCrashed || st.Reason == hypervisor.ReasonCrashed:
		return ReasonGuestCrashed
	case st.Reason == hypervisor.ReasonDestroyed:
		return ReasonDomainDestroyed
	case st.Reason == hypervisor.ReasonLibvirtUnavailable:
		return ReasonLibvirtUnavailable
	}
	return ReasonDomainFailed
}

func failureMessage(obs observation) string {
	switch {
	case obs.launcherGone:
		return "the launcher exited without reporting how the domain ended"
	case obs.launcher != nil && obs.launcher.Terminated:
		return "the kubelet stopped the launcher (its pod was deleted or evicted, or the VMI's liveness probe failed)"
	case obs.launcher != nil && obs.launcher.Message != "":
		return obs.launcher.Message
	case obs.launcher != nil:
		return "the domain ended: " + string(obs.launcher.State) + " (" + string(obs.launcher.Reason) + ")"
	}
	return "unknown"
}

// setCondition replaces or adds c, keeping the transition time when its
// status did not change.
func setCondition(s *v1.VirtualMachineInstanceStatus, c v1.VirtualMachineInstanceCondition, now metav1.Time) {
	for i := range s.Conditions {
		old := &s.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		c.LastProbeTime = old.LastProbeTime
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastTransitionTime = now
	s.Conditions = append(s.Conditions, c)
}

func removeCondition(s *v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			s.Conditions = append(s.Conditions[:i:i], s.Conditions[i+1:]...)
			if len(s.Conditions) == 0 {
				s.Conditions = nil
			}
			return
		}
	}
}

// hasWired reports whether a status already lists the wired interfaces
// (joined with the guest agent's report or not).
func hasWired(ifaces []v1.VirtualMachineInstanceNetworkInterface) bool {
	for _, i := range ifaces {
		if strings.HasPrefix(i.InfoSource, InfoSourceDomain) {
			return true
		}
	}
	return false
}
