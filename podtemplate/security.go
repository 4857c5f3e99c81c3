package podtemplate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

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

// podSecurityContext makes pod volumes group-owned by the qemu group,
// changing ownership only when a volume's root does not already match (a
// full recursive chown of a large PVC at every start is slow). A non-root
// pod also runs every container as the qemu user and group, requires a
// non-root user, uses the runtime's default seccomp profile and, unless it
// is on the host network (where network sysctls are not the pod's own),
// lets unprivileged processes bind the DHCP server's port. With passt (the
// passtBinding) every pod, root or not, lets them bind every port.
func podSecurityContext(nonRoot, hostNetwork, passt bool) *corev1.PodSecurityContext {
	ctx := &corev1.PodSecurityContext{
		FSGroup:             ptr.To[int64](nonRootUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
	}
	switch {
	case hostNetwork:
	case passt:
		ctx.Sysctls = []corev1.Sysctl{{Name: unprivilegedPortSysctl, Value: allPorts}}
	case nonRoot:
		ctx.Sysctls = []corev1.Sysctl{{Name: unprivilegedPortSysctl, Value: dhcpServerPort}}
	}
	if nonRoot {
		ctx.RunAsUser = ptr.To[int64](nonRootUID)
		ctx.RunAsGroup = ptr.To[int64](nonRootUID)
		ctx.RunAsNonRoot = ptr.To(true)
		ctx.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return ctx
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
		ctx := nonRootSecurityContext()
		if passt {
			ctx.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(PasstSeccompProfile)}
		}
		return ctx
	}
	add := []corev1.Capability{capNetBindService}
	if dedicated {
		add = append(add, capSysNice)
	}
	return &corev1.SecurityContext{
		RunAsUser:    ptr.To[int64](0),
		RunAsNonRoot: ptr.To(false),
		Privileged:   ptr.To(false),
		Capabilities: &corev1.Capabilities{Add: add, Drop: []corev1.Capability{capNetRaw}},
	}
}

// helperSecurityContext locks down the helper containers, which only copy a
// file or serve a disk image through a socket: the qemu user, no
// capabilities, no privilege escalation, a read-only root filesystem and the
// runtime's default seccomp profile.
func helperSecurityContext() *corev1.SecurityContext {
	ctx := nonRootSecurityContext()
	ctx.ReadOnlyRootFilesystem = ptr.To(true)
	return ctx
}

// nonRootSecurityContext is a non-root compute container's: a helper's but
// for the root filesystem, which stays writable as in KubeVirt's non-root
// launcher (libvirt's session daemons write only to the pod's volumes, but
// nothing has shown every path QEMU and libvirt may take to be read-only
// safe).
func nonRootSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr.To[int64](nonRootUID),
		RunAsGroup:               ptr.To[int64](nonRootUID),
		RunAsNonRoot:             ptr.To(true),
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
