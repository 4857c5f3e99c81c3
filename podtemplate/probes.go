package podtemplate

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Kinds of probe, as virt-launcher --probe names them.
const (
	readinessProbeKind = "readiness"
	livenessProbeKind  = "liveness"
)

// launcherProbe is the compute container's probe for a VMI's readiness or
// liveness probe, as KubeVirt's template service renders it: the timings
// are copied, with initialDelaySeconds raised by v1.ProbeStartupDelay
// (the time libvirt needs to start the guest); httpGet and tcpSocket are
// copied as they are (the kubelet checks the pod's IP, which the masquerade
// binding forwards to the guest); exec and guestAgentPing become an exec
// probe running 'virt-launcher --probe <kind>' in the compute container,
// which has the launcher run the VMI's probe through the guest agent
// (KubeVirt's virt-probe), with one second more than the guest is given.
// nil without a probe.
func (r *Renderer) launcherProbe(vmi *v1.VirtualMachineInstance, kind string, p *v1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	deref := func(v *int32) int32 {
		if v == nil {
			return 0
		}
		return *v
	}
	probe := &corev1.Probe{
		InitialDelaySeconds: deref(p.InitialDelaySeconds) + v1.ProbeStartupDelay,
		TimeoutSeconds:      deref(p.TimeoutSeconds),
		PeriodSeconds:       deref(p.PeriodSeconds),
		SuccessThreshold:    deref(p.SuccessThreshold),
		FailureThreshold:    deref(p.FailureThreshold),
	}
	switch {
	case p.HTTPGet != nil:
		probe.HTTPGet = p.HTTPGet.DeepCopy()
	case p.TCPSocket != nil:
		probe.TCPSocket = p.TCPSocket.DeepCopy()
	case p.Exec != nil || p.GuestAgentPing != nil:
		// The guest gets the probe's timeout (the kubelet's default of 1 s
		// when unset); the pod's probe one second more for the launcher's
		// round trip.
		guest := max(probe.TimeoutSeconds, 1)
		probe.TimeoutSeconds = guest + 1
		probe.Exec = &corev1.ExecAction{Command: []string{
			launcherBinary, "--probe", kind,
			"--kubevirt-share-dir", r.cfg.ShareDir,
			"--uid", string(vmi.UID),
			"--timeout-seconds", strconv.FormatInt(int64(guest), 10),
		}}
	}
	return probe
}
