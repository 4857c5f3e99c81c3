package podtemplate

import corev1 "k8s.io/api/core/v1"

// PasstSeccompProfile is the Localhost seccomp profile, relative to the
// kubelet's seccomp directory, of a non-root compute container whose guest
// uses the passtBinding: the container runtime's default profile plus the
// unshare, mount, umount2 and pivot_root with which passt sandboxes itself
// in a user namespace of its own (the default allows them only with
// CAP_SYS_ADMIN). The node agent installs it (nodeagent.InstallSeccompProfiles).
const PasstSeccompProfile = "vmkit/passt.json"

const (
	// nonRootUID is the qemu user of KubeVirt's images: the launcher runs as
	// it (unless the Root feature gate is on), helper containers always do,
	// and pod volumes are group-owned by it so QEMU can use them.
	nonRootUID = 107

	capNetBindService = "NET_BIND_SERVICE"
	capSysNice        = "SYS_NICE"
	capNetRaw         = "NET_RAW"

	// unprivilegedPortSysctl lets a process without capabilities bind the
	// ports from its value up, in the pod's own network namespace only. A
	// non-root launcher serves DHCP (UDP 67) to the guest of a bridge or
	// masquerade binding; this namespaced sysctl, one of Kubernetes' safe
	// set (allowed by Pod Security baseline and restricted), lets it do so
	// with every capability dropped, where KubeVirt adds NET_BIND_SERVICE
	// and sets it as a file capability on its binaries.
	unprivilegedPortSysctl = "net.ipv4.ip_unprivileged_port_start"
	dhcpServerPort         = "67"
	// allPorts lets passt, which runs as the qemu user (a root launcher's
	// passt drops to nobody), bind in the pod every port it forwards to a
	// passtBinding guest, SSH's 22 too.
	allPorts = "0"
)

// xdgEnv are the compute container's XDG directories in non-root mode,
// KubeVirt's: libvirt's session daemons keep their configuration, domain
// definitions, logs and capability cache under the private volume
// (XDG_CONFIG_HOME, XDG_CACHE_HOME) and their sockets under
// $XDG_RUNTIME_DIR/libvirt, the libvirt-runtime volume at /var/run/libvirt.
var xdgEnv = [...]corev1.EnvVar{
	{Name: "XDG_CACHE_HOME", Value: privateDir},
	{Name: "XDG_CONFIG_HOME", Value: privateDir},
	{Name: "XDG_RUNTIME_DIR", Value: "/var/run"},
}

// podSecurity holds the pod's security context and the values its pointers
// point at, so that one allocation serves them all.
type podSecurity struct {
	ctx         corev1.PodSecurityContext
	fsGroup     int64
	user, group int64
	policy      corev1.PodFSGroupChangePolicy
	nonRoot     bool
	seccomp     corev1.SeccompProfile
	sysctls     [1]corev1.Sysctl
}

// podSecurityContext makes pod volumes group-owned by the qemu group,
// changing ownership only when a volume's root does not already match (a
// full recursive chown of a large PVC at every start is slow). A non-root
// pod also runs every container as the qemu user and group, requires a
// non-root user, uses the runtime's default seccomp profile and, unless it
// is on the host network (where network sysctls are not the pod's own),
// lets unprivileged processes bind the DHCP server's port. With passt (the
// passtBinding) every pod, root or not, lets them bind every port.
func podSecurityContext(nonRoot, hostNetwork, passt bool) *corev1.PodSecurityContext {
	s := &podSecurity{fsGroup: nonRootUID, user: nonRootUID, group: nonRootUID, policy: corev1.FSGroupChangeOnRootMismatch, nonRoot: true}
	s.ctx.FSGroup = &s.fsGroup
	s.ctx.FSGroupChangePolicy = &s.policy
	if passt && !hostNetwork {
		s.sysctls[0] = corev1.Sysctl{Name: unprivilegedPortSysctl, Value: allPorts}
		s.ctx.Sysctls = s.sysctls[:1:1]
	}
	if !nonRoot {
		return &s.ctx
	}
	s.ctx.RunAsUser = &s.user
	s.ctx.RunAsGroup = &s.group
	s.ctx.RunAsNonRoot = &s.nonRoot
	s.seccomp.Type = corev1.SeccompProfileTypeRuntimeDefault
	s.ctx.SeccompProfile = &s.seccomp
	if !hostNetwork && !passt {
		s.sysctls[0] = corev1.Sysctl{Name: unprivilegedPortSysctl, Value: dhcpServerPort}
		s.ctx.Sysctls = s.sysctls[:1:1]
	}
	return &s.ctx
}

// computeSecurityContext is what libvirt and QEMU need in the compute
// container, and no more. Non-root (the default): the qemu user and group,
// no privilege escalation, every capability dropped and the runtime's
// default seccomp profile; libvirt runs as a session instance, the node
// agent prepares what needs privilege (taps and devices owned by the qemu
// user). Root (the Root feature gate): root inside the container (libvirt's
// system instance), never privileged, NET_BIND_SERVICE for the DHCP server
// of bridge and masquerade bindings, SYS_NICE to pin vCPUs when they are
// dedicated, and NET_RAW dropped. Devices come from device plugins, not
// from privileges, either way.
//
// A non-root compute container whose guest uses the passtBinding runs under
// the Localhost profile PasstSeccompProfile instead, which the node agent
// installs: the default plus what passt needs to sandbox itself.
func computeSecurityContext(dedicated, nonRoot, passt bool) *corev1.SecurityContext {
	if nonRoot {
		ctx := new(helperSecurity).initCompute()
		if passt {
			ctx.SeccompProfile.Type = corev1.SeccompProfileTypeLocalhost
			name := PasstSeccompProfile
			ctx.SeccompProfile.LocalhostProfile = &name
		}
		return ctx
	}
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

// helperSecurity holds a non-root container's security context and the
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

// init fills s in as a helper's and returns its context.
func (s *helperSecurity) init() *corev1.SecurityContext {
	s.initCompute()
	s.readOnlyRoot = true
	s.ctx.ReadOnlyRootFilesystem = &s.readOnlyRoot
	return &s.ctx
}

// initCompute fills s in as a non-root compute container's and returns its
// context: a helper's but for the root filesystem, which stays writable as
// in KubeVirt's non-root launcher (libvirt's session daemons write only to
// the pod's volumes, but nothing has shown every path QEMU and libvirt may
// take to be read-only safe).
func (s *helperSecurity) initCompute() *corev1.SecurityContext {
	*s = helperSecurity{uid: nonRootUID, gid: nonRootUID, nonRoot: true}
	s.drop[0] = "ALL"
	s.caps.Drop = s.drop[:1:1]
	s.seccomp.Type = corev1.SeccompProfileTypeRuntimeDefault
	s.ctx.RunAsUser = &s.uid
	s.ctx.RunAsGroup = &s.gid
	s.ctx.RunAsNonRoot = &s.nonRoot
	s.ctx.Privileged = &s.privileged
	s.ctx.AllowPrivilegeEscalation = &s.escalate
	s.ctx.Capabilities = &s.caps
	s.ctx.SeccompProfile = &s.seccomp
	return &s.ctx
}
