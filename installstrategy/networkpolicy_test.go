package installstrategy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestNetworkPolicies: each component's pods get a policy that lets in what
// the component serves and nothing else (#35 N5): virt-handler's REST API
// from virt-api's pods, every TCP port from the other virt-handlers (the
// migration listeners), its metrics from anywhere; virt-controller's and
// virt-api's ports from anywhere. Ingress only, so egress stays open.
// Without virt-api the handler's REST API is open to all; on the host
// network there are none.
func TestNetworkPolicies(t *testing.T) {
	tcp := corev1.ProtocolTCP
	port := func(p int32) networkingv1.NetworkPolicyPort {
		n := intstr.FromInt32(p)
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &n}
	}
	from := func(component string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1.AppLabel: component}}}}
	}
	spec := func(component string, rules ...networkingv1.NetworkPolicyIngressRule) networkingv1.NetworkPolicySpec {
		return networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1.AppLabel: component}},
			Ingress:     rules,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}
	}
	migration := networkingv1.NetworkPolicyIngressRule{From: from(v1.VirtHandlerValue), Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp}}}
	metrics := networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(8443)}}
	for _, tc := range []struct {
		name string
		cfg  *DeploymentConfig
		want map[string]networkingv1.NetworkPolicySpec
	}{
		{name: "default", cfg: testConfig(), want: map[string]networkingv1.NetworkPolicySpec{
			"virt-api":        spec(v1.VirtAPIValue, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(8443)}}),
			"virt-controller": spec(v1.VirtControllerValue, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(8080)}}),
			"virt-handler": spec(v1.VirtHandlerValue,
				networkingv1.NetworkPolicyIngressRule{From: from(v1.VirtAPIValue), Ports: []networkingv1.NetworkPolicyPort{port(8186)}},
				migration, metrics),
		}},
		{name: "without virt-api", cfg: (&DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0", WithoutVirtAPI: true}).SetID(),
			want: map[string]networkingv1.NetworkPolicySpec{
				"virt-controller": spec(v1.VirtControllerValue, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(8080)}}),
				"virt-handler": spec(v1.VirtHandlerValue,
					networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(8186)}},
					migration, metrics),
			}},
		{name: "host network", cfg: (&DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0", HostNetwork: "10.0.0.1"}).SetID(),
			want: map[string]networkingv1.NetworkPolicySpec{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Generate(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]networkingv1.NetworkPolicySpec{}
			for _, p := range s.NetworkPolicies {
				if p.Namespace != tc.cfg.Namespace {
					t.Errorf("NetworkPolicy %s in namespace %q, want %q", p.Name, p.Namespace, tc.cfg.Namespace)
				}
				got[p.Name] = p.Spec
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NetworkPolicies (-want +got):\n%s", diff)
			}
			// Every port a policy opens is one the selected pods declare.
			declared := map[string]map[int32]bool{}
			for _, d := range s.Deployments {
				declared[d.Name] = containerPorts(d.Spec.Template.Spec)
			}
			for _, d := range s.DaemonSets {
				declared[d.Name] = containerPorts(d.Spec.Template.Spec)
			}
			for _, p := range s.NetworkPolicies {
				component := p.Spec.PodSelector.MatchLabels[v1.AppLabel]
				if declared[component] == nil {
					t.Errorf("NetworkPolicy %s selects %s, which the strategy does not run", p.Name, component)
				}
				for _, r := range p.Spec.Ingress {
					for _, pp := range r.Ports {
						if pp.Port != nil && !declared[component][pp.Port.IntVal] {
							t.Errorf("NetworkPolicy %s opens port %d, which %s's pods do not declare", p.Name, pp.Port.IntVal, component)
						}
					}
				}
			}
		})
	}
}

func containerPorts(spec corev1.PodSpec) map[int32]bool {
	out := map[int32]bool{}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			out[p.ContainerPort] = true
		}
	}
	return out
}
