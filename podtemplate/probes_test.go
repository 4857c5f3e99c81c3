package podtemplate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestLauncherProbes: the VMI's probes on the compute container, as
// KubeVirt renders them: timings copied with 10 s more initial delay,
// network checks copied, guest-agent checks run by virt-launcher --probe
// with one second more than the guest gets.
func TestLauncherProbes(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	launcherProbe := func(kind, guestSeconds string) *corev1.ExecAction {
		return &corev1.ExecAction{Command: []string{"/usr/bin/virt-launcher", "--probe", kind,
			"--kubevirt-share-dir", "/var/run/kubevirt", "--uid", "c792fb7f-e459-4fa9-9e75-90beb4776f3e", "--timeout-seconds", guestSeconds}}
	}
	tests := []struct {
		name                string
		readiness, liveness *v1.Probe
		wantR, wantL        *corev1.Probe
	}{
		{name: "no probes"},
		{
			name:      "httpGet and tcpSocket with every timing",
			readiness: &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}, InitialDelaySeconds: i32(3), TimeoutSeconds: i32(2), PeriodSeconds: i32(5), SuccessThreshold: i32(2), FailureThreshold: i32(6)},
			liveness:  &v1.Probe{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(22)}, PeriodSeconds: i32(7)},
			wantR: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
				InitialDelaySeconds: 13, TimeoutSeconds: 2, PeriodSeconds: 5, SuccessThreshold: 2, FailureThreshold: 6},
			wantL: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(22)}},
				InitialDelaySeconds: 10, PeriodSeconds: 7},
		},
		{
			name:      "exec and guestAgentPing",
			readiness: &v1.Probe{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}, TimeoutSeconds: i32(4)},
			liveness:  &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}, InitialDelaySeconds: i32(60), FailureThreshold: i32(2)},
			wantR:     &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: launcherProbe("readiness", "4")}, InitialDelaySeconds: 10, TimeoutSeconds: 5},
			wantL:     &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: launcherProbe("liveness", "1")}, InitialDelaySeconds: 70, TimeoutSeconds: 2, FailureThreshold: 2},
		},
	}
	r := newTestRenderer(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{}
			readObject(t, "containerdisk-minimal.vmi.yaml", vmi)
			vmi.Spec.ReadinessProbe, vmi.Spec.LivenessProbe = tt.readiness, tt.liveness
			before := vmi.DeepCopy()
			pod, err := r.RenderLaunchPod(vmi)
			if err != nil {
				t.Fatalf("RenderLaunchPod: %v", err)
			}
			c := pod.Spec.Containers[0]
			if diff := cmp.Diff(tt.wantR, c.ReadinessProbe); diff != "" {
				t.Errorf("readiness probe (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantL, c.LivenessProbe); diff != "" {
				t.Errorf("liveness probe (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, vmi); diff != "" {
				t.Errorf("rendering changed the VMI (-before +after):\n%s", diff)
			}
			for _, other := range pod.Spec.Containers[1:] {
				if other.ReadinessProbe != nil || other.LivenessProbe != nil {
					t.Errorf("container %s has a probe; only compute probes the guest", other.Name)
				}
			}
		})
	}
}
