package podtemplate

import corev1 "k8s.io/api/core/v1"

const (
	// nonRootUID is the qemu user of KubeVirt's images; helper containers run
	// as it, and pod volumes are group-owned by it so QEMU can use them.
	nonRootUID = 107

	capNetBindService = "NET_BIND_SERVICE"
	capSysNice        = "SYS_NICE"
	capNetRaw         = "NET_RAW"
)

// podSecurityContext makes pod volumes group-owned by the qemu group,
// changing ownership only when a volume's root does not already match (a
// full recursive chown of a large PVC at every start is slow).
func podSecurityContext() *corev1.PodSecurityContext {
	s := &struct {
		ctx    corev1.PodSecurityContext
		group  int64
		policy corev1.PodFSGroupChangePolicy
	}{group: nonRootUID, policy: corev1.FSGroupChangeOnRootMismatch}
	s.ctx.FSGroup = &s.group
	s.ctx.FSGroupChangePolicy = &s.policy
	return &s.ctx
}

// computeSecurityContext is what libvirt and QEMU need in the compute
// container, and no more: root inside the container (libvirt's system
// instance), never privileged, NET_BIND_SERVICE for the DHCP server of
// bridge and masquerade bindings, SYS_NICE to pin vCPUs when they are
// dedicated, and NET_RAW dropped. Devices come from device plugins, not
// from privileges.
func computeSecurityContext(dedicated bool) *corev1.SecurityContext {
	s := &struct {
		ctx                 corev1.SecurityContext
		caps                corev1.Capabilities
		uid                 int64
		nonRoot, privileged bool
		add                 [2]corev1.Capability
		drop                [1]corev1.Capability
	}{}
	s.add[0] = capNetBindService
	n := 1
	if dedicated {
		s.add[1] = capSysNice
		n = 2
	}
	s.drop[0] = capNetRaw
	s.caps.Add = s.add[:n:n]
	s.caps.Drop = s.drop[:1:1]
	s.ctx.RunAsUser = &s.uid
	s.ctx.RunAsNonRoot = &s.nonRoot
	s.ctx.Privileged = &s.privileged
	s.ctx.Capabilities = &s.caps
	return &s.ctx
}

// helperSecurity holds a helper container's security context and the
// values its pointers point at, so that one allocation serves a context
// (and one slice of them all helpers of a pod).
type helperSecurity struct {
	ctx                   corev1.SecurityContext
	caps                  corev1.Capabilities
	seccomp               corev1.SeccompProfile
	uid, gid              int64
	nonRoot, readOnlyRoot bool
	privileged, escalate  bool
	drop                  [1]corev1.Capability
}

// helperSecurityContext locks down the helper containers, which only copy a
// file or serve a disk image through a socket: the qemu user, no
// capabilities, no privilege escalation, a read-only root filesystem and the
// runtime's default seccomp profile.
func helperSecurityContext() *corev1.SecurityContext {
	return new(helperSecurity).init()
}

// init fills s in and returns its context.
func (s *helperSecurity) init() *corev1.SecurityContext {
	*s = helperSecurity{uid: nonRootUID, gid: nonRootUID, nonRoot: true, readOnlyRoot: true}
	s.drop[0] = "ALL"
	s.caps.Drop = s.drop[:1:1]
	s.seccomp.Type = corev1.SeccompProfileTypeRuntimeDefault
	s.ctx.RunAsUser = &s.uid
	s.ctx.RunAsGroup = &s.gid
	s.ctx.RunAsNonRoot = &s.nonRoot
	s.ctx.Privileged = &s.privileged
	s.ctx.AllowPrivilegeEscalation = &s.escalate
	s.ctx.ReadOnlyRootFilesystem = &s.readOnlyRoot
	s.ctx.Capabilities = &s.caps
	s.ctx.SeccompProfile = &s.seccomp
	return &s.ctx
}
