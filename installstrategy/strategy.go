package installstrategy

import (
	"fmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/vmkit/vmkit/vmapi/crds"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Object is any object of a strategy.
type Object interface {
	metav1.Object
	runtime.Object
}

// Strategy is every object an installation of vmkit consists of, for one
// DeploymentConfig. Every object carries the labels
// app.kubernetes.io/managed-by=virt-operator and kubevirt.io=<component>
// and the install-strategy version, registry and identifier annotations.
type Strategy struct {
	// Config is what the strategy was generated from.
	Config DeploymentConfig

	CRDs                []*apiextensionsv1.CustomResourceDefinition
	PriorityClasses     []*schedulingv1.PriorityClass
	ServiceAccounts     []*corev1.ServiceAccount
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
	Services            []*corev1.Service
	Deployments         []*appsv1.Deployment
	DaemonSets          []*appsv1.DaemonSet
	// PodDisruptionBudgets keep one pod of virt-api and of virt-controller
	// through voluntary disruptions such as drains.
	PodDisruptionBudgets []*policyv1.PodDisruptionBudget
	// NetworkPolicies let into the components' pods only what they serve
	// (see HandlerNetworkPolicyName); none on the host network.
	NetworkPolicies []*networkingv1.NetworkPolicy
	APIServices     []*apiregv1.APIService
	// AdmissionPolicies and their bindings are enforced by the API server
	// itself (see VMIUpdatePolicyName).
	AdmissionPolicies       []*admissionregistrationv1.ValidatingAdmissionPolicy
	AdmissionPolicyBindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// ValidatingWebhooks are virt-api's admission webhooks (see
	// ValidatingWebhookName); none without virt-api.
	ValidatingWebhooks []*admissionregistrationv1.ValidatingWebhookConfiguration
	// MutatingWebhooks are virt-api's mutating webhooks (see
	// MutatingWebhookName); none without virt-api.
	MutatingWebhooks []*admissionregistrationv1.MutatingWebhookConfiguration
	// ServiceMonitors and PrometheusRules are the Prometheus Operator's
	// kinds (monitoring.coreos.com/v1), which vmkit has no Go types of:
	// KubeVirt's ServiceMonitor and its recording rules and alerts. Apply
	// writes them only to a cluster that serves them
	// (ApplyOptions.Monitoring).
	ServiceMonitors []*unstructured.Unstructured
	PrometheusRules []*unstructured.Unstructured
}

// Objects returns every object in the order Apply writes them: CRDs first,
// then priority classes, RBAC, Services, the network policies (before the
// pods they isolate), workloads and their disruption
// budgets, the APIService (whose
// backing Service must exist), the admission policies and last the
// Prometheus Operator's objects.
func (s *Strategy) Objects() []Object {
	var out []Object
	out = appendAll(out, s.CRDs)
	out = appendAll(out, s.PriorityClasses)
	out = appendAll(out, s.ServiceAccounts)
	out = appendAll(out, s.ClusterRoles)
	out = appendAll(out, s.ClusterRoleBindings)
	out = appendAll(out, s.Roles)
	out = appendAll(out, s.RoleBindings)
	out = appendAll(out, s.Services)
	out = appendAll(out, s.NetworkPolicies)
	out = appendAll(out, s.Deployments)
	out = appendAll(out, s.DaemonSets)
	out = appendAll(out, s.PodDisruptionBudgets)
	out = appendAll(out, s.APIServices)
	out = appendAll(out, s.AdmissionPolicies)
	out = appendAll(out, s.AdmissionPolicyBindings)
	out = appendAll(out, s.ValidatingWebhooks)
	out = appendAll(out, s.MutatingWebhooks)
	out = appendAll(out, s.ServiceMonitors)
	out = appendAll(out, s.PrometheusRules)
	return out
}

func appendAll[T Object](out []Object, objs []T) []Object {
	for _, o := range objs {
		out = append(out, o)
	}
	return out
}

// Well-known object names.
const (
	// PriorityClassName is the priority class of every component's pods.
	PriorityClassName = "kubevirt-cluster-critical"
	// APIServiceName is the Service in front of virt-api.
	APIServiceName = "virt-api"
	// PrometheusServiceName selects every component's metrics endpoint.
	PrometheusServiceName = "kubevirt-prometheus-metrics"
	// SubresourcesGroup is the API group virt-api serves subresources in.
	SubresourcesGroup = "subresources.kubevirt.io"
	// PrometheusLabel on a pod makes the Prometheus Service select it.
	PrometheusLabel = "prometheus.kubevirt.io"
)

// Generate returns the strategy for cfg. It is pure: the same config gives
// the same objects.
func Generate(cfg *DeploymentConfig) (*Strategy, error) {
	if cfg == nil {
		return nil, fmt.Errorf("installstrategy: nil deployment config")
	}
	c := *cfg
	if c.ID == "" {
		c.SetID()
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("installstrategy: %w", err)
	}
	s := &Strategy{Config: c}
	all, err := crds.All()
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %w", err)
	}
	for _, crd := range all {
		// The KubeVirt CRD belongs to the operator's own installation: the
		// strategy is what a KubeVirt CR installs, so it cannot remove it.
		if crd.Name == crds.KubeVirt {
			continue
		}
		crd.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
		meta := objectMeta(&c, "", crd.Name, "")
		crd.Labels = mergeMaps(crd.Labels, meta.Labels)
		crd.Annotations = mergeMaps(crd.Annotations, meta.Annotations)
		s.CRDs = append(s.CRDs, crd)
	}
	s.PriorityClasses = append(s.PriorityClasses, &schedulingv1.PriorityClass{
		TypeMeta:    metav1.TypeMeta{APIVersion: schedulingv1.SchemeGroupVersion.String(), Kind: "PriorityClass"},
		ObjectMeta:  objectMeta(&c, "", PriorityClassName, ""),
		Value:       1000000000,
		Description: "Priority of vmkit's components (virt-api, virt-controller, virt-handler).",
	})
	s.addRBAC(&c)
	s.addAdmissionPolicies(&c)
	s.addServices(&c)
	s.addNetworkPolicies(&c)
	if err := s.addWorkloads(&c); err != nil {
		return nil, fmt.Errorf("installstrategy: %w", err)
	}
	if err := s.addMonitoring(&c); err != nil {
		return nil, err
	}
	if c.WithoutVirtAPI {
		return s, nil
	}
	s.addValidatingWebhooks(&c)
	s.addMutatingWebhooks(&c)
	s.APIServices = append(s.APIServices, &apiregv1.APIService{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiregv1.SchemeGroupVersion.String(), Kind: "APIService"},
		ObjectMeta: objectMeta(&c, v1.VirtAPIValue, "v1."+SubresourcesGroup, ""),
		Spec: apiregv1.APIServiceSpec{
			Service:              &apiregv1.ServiceReference{Namespace: c.Namespace, Name: APIServiceName, Port: ptr(int32(443))},
			Group:                SubresourcesGroup,
			Version:              "v1",
			GroupPriorityMinimum: 1000,
			VersionPriority:      15,
		},
	})
	return s, nil
}

// objectMeta is the metadata of every object of the strategy.
func objectMeta(c *DeploymentConfig, component, name, namespace string) metav1.ObjectMeta {
	labels := map[string]string{
		v1.ManagedByLabel: v1.ManagedByLabelOperatorValue,
		v1.AppLabel:       component,
	}
	for key, label := range map[string]string{
		PropertyProductName:      "app.kubernetes.io/part-of",
		PropertyProductVersion:   "app.kubernetes.io/version",
		PropertyProductComponent: "app.kubernetes.io/component",
	} {
		if value := c.property(key); value != "" {
			labels[label] = value
		}
	}
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    labels,
		Annotations: map[string]string{
			v1.InstallStrategyVersionAnnotation:    c.Version,
			v1.InstallStrategyRegistryAnnotation:   c.Registry,
			v1.InstallStrategyIdentifierAnnotation: c.ID,
		},
	}
}

func mergeMaps(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

func ptr[T any](v T) *T { return &v }
