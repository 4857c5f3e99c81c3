package podtemplate

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// nodeSelector is the VMI's node selector plus kubevirt.io/schedulable=true
// (a node whose node agent is healthy), kubevirt.io/cpumanager=true for
// dedicated CPUs (a node whose kubelet runs the static CPU manager policy)
// and kubernetes.io/arch for a VMI that names its architecture. The
// renderer's keys win over the VMI's.
func nodeSelector(spec *v1.VirtualMachineInstanceSpec, dedicated bool) map[string]string {
	sel := make(map[string]string, len(spec.NodeSelector)+3)
	for k, v := range spec.NodeSelector {
		sel[k] = v
	}
	sel[v1.NodeSchedulable] = "true"
	if dedicated {
		sel[v1.CPUManager] = "true"
	}
	if spec.Architecture != "" {
		sel[corev1.LabelArchStable] = strings.ToLower(spec.Architecture)
	}
	return sel
}

// tolerations copies the VMI's tolerations.
func tolerations(spec *v1.VirtualMachineInstanceSpec) []corev1.Toleration {
	if spec.Tolerations == nil {
		return nil
	}
	out := make([]corev1.Toleration, len(spec.Tolerations))
	for i := range spec.Tolerations {
		spec.Tolerations[i].DeepCopyInto(&out[i])
	}
	return out
}

// topologySpread copies the VMI's topology spread constraints.
func topologySpread(spec *v1.VirtualMachineInstanceSpec) []corev1.TopologySpreadConstraint {
	if spec.TopologySpreadConstraints == nil {
		return nil
	}
	out := make([]corev1.TopologySpreadConstraint, len(spec.TopologySpreadConstraints))
	for i := range spec.TopologySpreadConstraints {
		spec.TopologySpreadConstraints[i].DeepCopyInto(&out[i])
	}
	return out
}

// hostname is the pod's (and the guest's) host name: spec.hostname, else
// the VMI's name up to its first dot, cut to 63 characters.
func hostname(ref objectRef, spec *v1.VirtualMachineInstanceSpec, name string) (string, error) {
	if spec.Hostname != "" {
		if !isDNSLabel(spec.Hostname) {
			return "", ref.errorf("spec.hostname", "%q: %s", spec.Hostname, dnsLabelError(spec.Hostname))
		}
		return spec.Hostname, nil
	}
	h, _, _ := strings.Cut(name, ".")
	if len(h) > validation.DNS1123LabelMaxLength {
		h = strings.TrimRight(h[:validation.DNS1123LabelMaxLength], "-")
	}
	return h, nil
}

// subdomain checks spec.subdomain.
func subdomain(ref objectRef, spec *v1.VirtualMachineInstanceSpec) (string, error) {
	if spec.Subdomain == "" {
		return "", nil
	}
	if !isDNSLabel(spec.Subdomain) {
		return "", ref.errorf("spec.subdomain", "%q: %s", spec.Subdomain, dnsLabelError(spec.Subdomain))
	}
	return spec.Subdomain, nil
}

// avoidNode adds to affinity (which may be nil) the requirement that the
// pod runs on neither the given node nor a node running another pod with
// the given labels. A required node selector's terms are ORed, so the node
// requirement goes into every term.
func avoidNode(affinity *corev1.Affinity, node string, podLabels map[string]string) *corev1.Affinity {
	if affinity == nil {
		affinity = &corev1.Affinity{}
	}
	if node != "" {
		notOnNode := corev1.NodeSelectorRequirement{
			Key:      corev1.LabelHostname,
			Operator: corev1.NodeSelectorOpNotIn,
			Values:   []string{node},
		}
		if affinity.NodeAffinity == nil {
			affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := affinity.NodeAffinity
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notOnNode}}},
			}
		} else {
			terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			for i := range terms {
				terms[i].MatchExpressions = append(terms[i].MatchExpressions, notOnNode)
			}
		}
	}
	if affinity.PodAntiAffinity == nil {
		affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(
		affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
		corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: podLabels},
			TopologyKey:   corev1.LabelHostname,
		})
	return affinity
}
