package installstrategy

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The NetworkPolicies of the components' pods, named after the components.
// Each selects one component's pods (kubevirt.io=<component>) and lets in
// only what that component serves (#35 N5); everything else is dropped
// where the cluster's network plugin enforces NetworkPolicies:
//
//   - virt-handler: its REST API (HandlerConsolePort) from virt-api's pods
//     in the install namespace only; every TCP port from the other
//     virt-handler pods (the migration listeners take ports as migrations
//     come); /metrics (HandlerHTTPPort) from anywhere, as Prometheus may run
//     in any namespace and /metrics answers only callers the API server
//     authorizes.
//   - virt-controller: /metrics, /healthz and /readyz (ControllerHTTPPort),
//     from anywhere for the same reason and the kubelet's probes.
//   - virt-api: APIPort from anywhere. The aggregator and the admission
//     webhooks are called by kube-apiserver, whose address a policy cannot
//     know (it may be a host's, a load balancer's or outside the cluster).
//
// They restrict ingress only (policyTypes [Ingress]): what the components
// reach (the API server, each other, launchers' sockets) stays open.
// Host-network installs (DeploymentConfig.HostNetwork) get none:
// NetworkPolicies do not apply to host-network pods. Without virt-api
// (DeploymentConfig.WithoutVirtAPI) the virt-api that serves
// subresources.kubevirt.io runs elsewhere: virt-handler's REST API is then
// open to every source, as before, still behind its client certificates.
const (
	APINetworkPolicyName        = v1.VirtAPIValue
	ControllerNetworkPolicyName = v1.VirtControllerValue
	HandlerNetworkPolicyName    = v1.VirtHandlerValue
)

func (s *Strategy) addNetworkPolicies(c *DeploymentConfig) {
	if c.HostNetwork != "" {
		return
	}
	tcp := corev1.ProtocolTCP
	port := func(p int32) networkingv1.NetworkPolicyPort {
		n := intstr.FromInt32(p)
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &n}
	}
	pods := func(component string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1.AppLabel: component}}}}
	}
	policy := func(component, name string, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
			ObjectMeta: objectMeta(c, component, name, c.Namespace),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1.AppLabel: component}},
				Ingress:     rules,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			},
		}
	}
	if !c.WithoutVirtAPI {
		s.NetworkPolicies = append(s.NetworkPolicies, policy(v1.VirtAPIValue, APINetworkPolicyName,
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(APIPort)}}))
	}
	s.NetworkPolicies = append(s.NetworkPolicies, policy(v1.VirtControllerValue, ControllerNetworkPolicyName,
		networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(ControllerHTTPPort)}}))
	rest := networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(HandlerConsolePort)}}
	if !c.WithoutVirtAPI {
		rest.From = pods(v1.VirtAPIValue)
	}
	s.NetworkPolicies = append(s.NetworkPolicies, policy(v1.VirtHandlerValue, HandlerNetworkPolicyName,
		rest,
		// Every TCP port: a Port left out matches all ports of the protocol.
		networkingv1.NetworkPolicyIngressRule{From: pods(v1.VirtHandlerValue), Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp}}},
		networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(HandlerHTTPPort)}}))
}
