package installstrategy

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Keys of an install strategy ConfigMap's data.
const (
	// ManifestsKey holds every object as multi-document YAML, gzipped and base64-encoded.
	ManifestsKey = "manifests"
	// ConfigKey holds the DeploymentConfig as JSON.
	ConfigKey = "deploymentConfig"
	// ConfigMapPrefix starts the name of every install strategy ConfigMap;
	// the config ID follows.
	ConfigMapPrefix = "kubevirt-install-strategy-"
)

// ConfigMapName is the name of the ConfigMap holding the strategy of the config with this ID.
func ConfigMapName(id string) string { return ConfigMapPrefix + id }

// ToConfigMap encodes the strategy as the ConfigMap virt-operator
// --dump-install-strategy writes: in the config's namespace, labelled
// kubevirt.io/install-strategy, annotated with the version, registry and
// config ID, the objects gzipped and base64-encoded under "manifests".
func (s *Strategy) ToConfigMap() (*corev1.ConfigMap, error) {
	var yamlDocs bytes.Buffer
	for _, obj := range s.Objects() {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("installstrategy: encoding %s: %w", describe(obj), err)
		}
		yamlDocs.WriteString("---\n")
		yamlDocs.Write(data)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(yamlDocs.Bytes()); err != nil {
		return nil, fmt.Errorf("installstrategy: compressing manifests: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("installstrategy: compressing manifests: %w", err)
	}
	cfg, err := json.Marshal(&s.Config)
	if err != nil {
		return nil, fmt.Errorf("installstrategy: encoding config: %w", err)
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ConfigMapName(s.Config.ID),
			Namespace: s.Config.Namespace,
			Labels:    map[string]string{v1.InstallStrategyLabel: ""},
			Annotations: map[string]string{
				v1.InstallStrategyVersionAnnotation:    s.Config.Version,
				v1.InstallStrategyRegistryAnnotation:   s.Config.Registry,
				v1.InstallStrategyIdentifierAnnotation: s.Config.ID,
			},
		},
		Data: map[string]string{
			ManifestsKey: base64.StdEncoding.EncodeToString(zipped.Bytes()),
			ConfigKey:    string(cfg),
		},
	}, nil
}

// FromConfigMap decodes a ConfigMap written by ToConfigMap. It checks that
// the config's ID matches the ConfigMap's identifier annotation.
func FromConfigMap(cm *corev1.ConfigMap) (*Strategy, error) {
	where := "ConfigMap " + cm.Namespace + "/" + cm.Name
	cfg, err := ParseDeploymentConfig(cm.Data[ConfigKey])
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %s: %w", where, err)
	}
	if id := cm.Annotations[v1.InstallStrategyIdentifierAnnotation]; id != cfg.ID {
		return nil, fmt.Errorf("installstrategy: %s: annotation %s is %q but the config's ID is %q", where, v1.InstallStrategyIdentifierAnnotation, id, cfg.ID)
	}
	zipped, err := base64.StdEncoding.DecodeString(cm.Data[ManifestsKey])
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %s: %s: %w", where, ManifestsKey, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %s: %s: %w", where, ManifestsKey, err)
	}
	docs, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %s: %s: %w", where, ManifestsKey, err)
	}
	s := &Strategy{Config: *cfg}
	for i, doc := range strings.Split(string(docs), "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if err := s.add([]byte(doc)); err != nil {
			return nil, fmt.Errorf("installstrategy: %s: document %d: %w", where, i, err)
		}
	}
	return s, nil
}

// add decodes one YAML document into the list of its kind.
func (s *Strategy) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	switch tm.GroupVersionKind() {
	case apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"):
		return decodeInto(doc, &s.CRDs)
	case schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"):
		return decodeInto(doc, &s.PriorityClasses)
	case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
		return decodeInto(doc, &s.ServiceAccounts)
	case rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):
		return decodeInto(doc, &s.ClusterRoles)
	case rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):
		return decodeInto(doc, &s.ClusterRoleBindings)
	case rbacv1.SchemeGroupVersion.WithKind("Role"):
		return decodeInto(doc, &s.Roles)
	case rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):
		return decodeInto(doc, &s.RoleBindings)
	case corev1.SchemeGroupVersion.WithKind("Service"):
		return decodeInto(doc, &s.Services)
	case networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"):
		return decodeInto(doc, &s.NetworkPolicies)
	case appsv1.SchemeGroupVersion.WithKind("Deployment"):
		return decodeInto(doc, &s.Deployments)
	case appsv1.SchemeGroupVersion.WithKind("DaemonSet"):
		return decodeInto(doc, &s.DaemonSets)
	case policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"):
		return decodeInto(doc, &s.PodDisruptionBudgets)
	case apiregv1.SchemeGroupVersion.WithKind("APIService"):
		return decodeInto(doc, &s.APIServices)
	case admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"):
		return decodeInto(doc, &s.AdmissionPolicies)
	case admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding"):
		return decodeInto(doc, &s.AdmissionPolicyBindings)
	case admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"):
		return decodeInto(doc, &s.ValidatingWebhooks)
	case admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"):
		return decodeInto(doc, &s.MutatingWebhooks)
	case ServiceMonitorGVK:
		return decodeInto(doc, &s.ServiceMonitors)
	case PrometheusRuleGVK:
		return decodeInto(doc, &s.PrometheusRules)
	}
	return fmt.Errorf("unknown kind %s %s", tm.APIVersion, tm.Kind)
}

func decodeInto[T any](doc []byte, list *[]*T) error {
	obj := new(T)
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	*list = append(*list, obj)
	return nil
}

// describe names an object for errors: Kind namespace/name.
func describe(obj Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if ns := obj.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}
