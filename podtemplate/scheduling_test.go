package podtemplate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestNodeSelector(t *testing.T) {
	tests := []struct {
		name      string
		spec      v1.VirtualMachineInstanceSpec
		dedicated bool
		want      map[string]string
	}{
		{"schedulable nodes only", v1.VirtualMachineInstanceSpec{}, false,
			map[string]string{"kubevirt.io/schedulable": "true"}},
		{"the VMI's selector, but not against the node agent's health", v1.VirtualMachineInstanceSpec{
			NodeSelector: map[string]string{"zone": "a", "kubevirt.io/schedulable": "false"}}, false,
			map[string]string{"zone": "a", "kubevirt.io/schedulable": "true"}},
		{"dedicated CPUs need the static CPU manager", v1.VirtualMachineInstanceSpec{}, true,
			map[string]string{"kubevirt.io/schedulable": "true", "kubevirt.io/cpumanager": "true"}},
		{"architecture", v1.VirtualMachineInstanceSpec{Architecture: "ARM64"}, false,
			map[string]string{"kubevirt.io/schedulable": "true", "kubernetes.io/arch": "arm64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, nodeSelector(&tt.spec, tt.dedicated)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	tests := []struct {
		name, vmiName, hostname, want, err string
	}{
		{"the VMI's name", "web-1", "", "web-1", ""},
		{"spec.hostname wins", "web-1", "frontend", "frontend", ""},
		{"first label of a dotted name", "web.example", "", "web", ""},
		{"cut to 63, no trailing dash", long, "", strings.Repeat("a", 62), ""},
		{"invalid spec.hostname", "web-1", "Front_End", "", `VirtualMachineInstance ns/web-1: spec.hostname: "Front_End": a lowercase RFC 1123 label`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := objectRef{kind: kindVMI, namespace: "ns", name: tt.vmiName}
			got, err := hostname(ref, &v1.VirtualMachineInstanceSpec{Hostname: tt.hostname}, tt.vmiName)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Errorf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("hostname %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestAvoidNode(t *testing.T) {
	podLabels := map[string]string{v1.CreatedByLabel: "uid"}
	antiAffinity := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: podLabels},
		TopologyKey:   "kubernetes.io/hostname",
	}
	notOnA := corev1.NodeSelectorRequirement{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-a"}}
	ssd := corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}
	nvme := corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvme"}}
	existingAnti := corev1.PodAffinityTerm{TopologyKey: "zone"}
	tests := []struct {
		name string
		in   *corev1.Affinity
		node string
		want *corev1.Affinity
	}{{
		name: "no affinity, source node known",
		node: "node-a",
		want: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notOnA}}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{antiAffinity}},
		},
	}, {
		name: "source node unknown: pod anti-affinity only",
		want: &corev1.Affinity{
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{antiAffinity}},
		},
	}, {
		name: "ORed node terms each get the requirement; existing anti-affinity stays",
		in: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{ssd}}, {MatchExpressions: []corev1.NodeSelectorRequirement{nvme}}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{existingAnti}},
		},
		node: "node-a",
		want: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{ssd, notOnA}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{nvme, notOnA}},
				}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{existingAnti, antiAffinity}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, avoidNode(tt.in, tt.node, podLabels)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
