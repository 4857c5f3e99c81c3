package podtemplate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func pointer[T any](v T) *T { return &v }

func TestSecurityContexts(t *testing.T) {
	tests := []struct {
		name string
		got  *corev1.SecurityContext
		want *corev1.SecurityContext
	}{{
		name: "compute: the qemu user with nothing at all, root filesystem writable",
		got:  computeSecurityContext(false, true, false),
		want: &corev1.SecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			Privileged: pointer(false), AllowPrivilegeEscalation: pointer(false),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}, {
		name: "non-root compute with dedicated CPUs gets no SYS_NICE either (KubeVirt's)",
		got:  computeSecurityContext(true, true, false),
		want: &corev1.SecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			Privileged: pointer(false), AllowPrivilegeEscalation: pointer(false),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}, {
		name: "non-root compute of a passt guest: the Localhost profile that lets passt sandbox itself",
		got:  computeSecurityContext(false, true, true),
		want: &corev1.SecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			Privileged: pointer(false), AllowPrivilegeEscalation: pointer(false),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: pointer("vmkit/passt.json")},
		},
	}, {
		name: "Root gate: compute as root for libvirt, never privileged, NET_RAW dropped",
		got:  computeSecurityContext(false, false, false),
		want: &corev1.SecurityContext{
			RunAsUser: pointer[int64](0), RunAsNonRoot: pointer(false), Privileged: pointer(false),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"NET_RAW"}},
		},
	}, {
		name: "Root gate: compute with dedicated CPUs may pin them",
		got:  computeSecurityContext(true, false, false),
		want: &corev1.SecurityContext{
			RunAsUser: pointer[int64](0), RunAsNonRoot: pointer(false), Privileged: pointer(false),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE", "SYS_NICE"}, Drop: []corev1.Capability{"NET_RAW"}},
		},
	}, {
		name: "helpers: the qemu user with nothing at all",
		got:  helperSecurityContext(),
		want: &corev1.SecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			Privileged: pointer(false), AllowPrivilegeEscalation: pointer(false), ReadOnlyRootFilesystem: pointer(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	pods := []struct {
		name                        string
		nonRoot, hostNetwork, passt bool
		want                        *corev1.PodSecurityContext
	}{{
		name: "non-root", nonRoot: true,
		want: &corev1.PodSecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			FSGroup: pointer[int64](107), FSGroupChangePolicy: pointer(corev1.FSGroupChangeOnRootMismatch),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "67"}},
		},
	}, {
		name: "non-root on the host network: no network sysctl", nonRoot: true, hostNetwork: true,
		want: &corev1.PodSecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			FSGroup: pointer[int64](107), FSGroupChangePolicy: pointer(corev1.FSGroupChangeOnRootMismatch),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}, {
		name: "Root gate",
		want: &corev1.PodSecurityContext{FSGroup: pointer[int64](107), FSGroupChangePolicy: pointer(corev1.FSGroupChangeOnRootMismatch)},
	}, {
		name: "non-root with passt: every port bindable", nonRoot: true, passt: true,
		want: &corev1.PodSecurityContext{
			RunAsUser: pointer[int64](107), RunAsGroup: pointer[int64](107), RunAsNonRoot: pointer(true),
			FSGroup: pointer[int64](107), FSGroupChangePolicy: pointer(corev1.FSGroupChangeOnRootMismatch),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
		},
	}, {
		name: "Root gate with passt: passt drops to nobody", passt: true,
		want: &corev1.PodSecurityContext{FSGroup: pointer[int64](107), FSGroupChangePolicy: pointer(corev1.FSGroupChangeOnRootMismatch),
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}},
	}}
	for _, p := range pods {
		if diff := cmp.Diff(p.want, podSecurityContext(p.nonRoot, p.hostNetwork, p.passt)); diff != "" {
			t.Errorf("pod, %s (-want +got):\n%s", p.name, diff)
		}
	}
}

// TestSecurityContextPointersAreDistinct: each pointer of a context points
// at its own value, and no two contexts share one.
func TestSecurityContextPointersAreDistinct(t *testing.T) {
	c := computeSecurityContext(true, false, false)
	*c.Privileged = true
	if *c.RunAsNonRoot {
		t.Error("compute: RunAsNonRoot and Privileged share a bool")
	}
	c = computeSecurityContext(false, true, false)
	*c.AllowPrivilegeEscalation = true
	*c.RunAsUser = 0
	if *c.Privileged || *c.RunAsGroup != 107 || !*c.RunAsNonRoot {
		t.Errorf("non-root compute: fields share memory: %+v", c)
	}
	p := podSecurityContext(true, false, false)
	*p.RunAsUser = 0
	if *p.RunAsGroup != 107 || *p.FSGroup != 107 {
		t.Errorf("pod: fields share memory: %+v", p)
	}
	h := helperSecurityContext()
	*h.RunAsUser = 5
	*h.AllowPrivilegeEscalation = true
	if *h.RunAsGroup != 107 || *h.Privileged || !*h.ReadOnlyRootFilesystem || !*h.RunAsNonRoot {
		t.Errorf("helper: fields share memory: %+v", h)
	}
	if h2 := helperSecurityContext(); *h2.RunAsUser != 107 {
		t.Error("helper contexts share memory across calls")
	}
}
