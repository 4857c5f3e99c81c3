package installstrategy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// How Prometheus finds the components' metrics.
//
// A plain Prometheus scrapes the pods annotated prometheus.io/scrape=true
// at prometheus.io/port, prometheus.io/path, with prometheus.io/scheme (the
// kubernetes-pods job of Prometheus's example configuration;
// docs/metrics.md has one): virt-handler, virt-controller and virt-operator,
// all over HTTPS and each answering only a scraper the API server
// authenticates and allows get on /metrics (MetricsReaderClusterRoleName),
// so the job presents its service account's token. The Service
// PrometheusServiceName selects the same
// pods; with the Prometheus Operator the strategy's ServiceMonitor scrapes
// them through it, and its PrometheusRule records KubeVirt's rules and
// raises KubeVirt's alerts. Both are applied only where the cluster serves
// the Prometheus Operator's kinds (ApplyOptions.Monitoring,
// MonitoringServed).
const (
	// MonitoringGroup is the Prometheus Operator's API group.
	MonitoringGroup = "monitoring.coreos.com"
	// PrometheusRuleName names the ServiceMonitor and the PrometheusRule
	// (KubeVirt's name for both).
	PrometheusRuleName = "prometheus-kubevirt-rules"
	// RunbookURLBase prefixes the runbook_url of KubeVirt's alerts.
	RunbookURLBase = "https://kubevirt.io/monitoring/runbooks/"

	// The well-known annotations of a pod a plain Prometheus scrapes.
	AnnotationPrometheusScrape = "prometheus.io/scrape"
	AnnotationPrometheusPort   = "prometheus.io/port"
	AnnotationPrometheusPath   = "prometheus.io/path"
	AnnotationPrometheusScheme = "prometheus.io/scheme"
)

// MetricsReaderClusterRoleName grants get on the non-resource URL
// /metrics, which virt-controller, virt-handler and virt-operator ask the
// API server about before they answer a scrape (a SubjectAccessReview; the
// scraper authenticates with its service account's token). Bind it to
// Prometheus's service account; the strategy binds it to the KubeVirt CR's
// monitorAccount (default prometheus-k8s) in its monitorNamespace when
// that is set. Prometheus installations whose role already grants get on
// /metrics (kube-prometheus's prometheus-k8s does, for the kubelet's and
// kube-controller-manager's) need nothing more.
const MetricsReaderClusterRoleName = "kubevirt.io:metrics-reader"

// defaultMonitorAccount is KubeVirt's default monitorAccount.
const defaultMonitorAccount = "prometheus-k8s"

// The Prometheus Operator's kinds the strategy holds.
var (
	ServiceMonitorGVK = schema.GroupVersionKind{Group: MonitoringGroup, Version: "v1", Kind: "ServiceMonitor"}
	PrometheusRuleGVK = schema.GroupVersionKind{Group: MonitoringGroup, Version: "v1", Kind: "PrometheusRule"}
)

// metricsEndpoint is where a component serves /metrics.
type metricsEndpoint struct {
	component string
	port      int32
	scheme    string
}

// metricsEndpoints are the components Prometheus scrapes. virt-api is
// not among them: it exports none of KubeVirt's metrics, and its
// API server's own /metrics needs the cluster's authorization.
var metricsEndpoints = []metricsEndpoint{
	{v1.VirtControllerValue, ControllerHTTPPort, "https"},
	{v1.VirtHandlerValue, HandlerHTTPPort, "https"},
	{v1.VirtOperatorValue, OperatorHTTPPort, "https"},
}

// ServiceAccountTokenFile is where a pod's service account token is
// mounted: the ServiceMonitor has Prometheus present its own.
const ServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// scrapeAnnotations are the pod annotations that make a plain Prometheus
// scrape component's metrics; nil for a component it does not scrape.
func scrapeAnnotations(component string) map[string]string {
	for _, e := range metricsEndpoints {
		if e.component == component {
			return map[string]string{
				AnnotationPrometheusScrape: "true",
				AnnotationPrometheusPort:   strconv.Itoa(int(e.port)),
				AnnotationPrometheusPath:   "/metrics",
				AnnotationPrometheusScheme: e.scheme,
			}
		}
	}
	return nil
}

// addMetricsReader adds MetricsReaderClusterRoleName and, when the CR names
// Prometheus's namespace, its binding to Prometheus's service account there.
func (s *Strategy) addMetricsReader(c *DeploymentConfig) {
	s.ClusterRoles = append(s.ClusterRoles, &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: objectMeta(c, "", MetricsReaderClusterRoleName, ""),
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	})
	ns := c.property(PropertyMonitorNamespace)
	if ns == "" {
		return
	}
	account := c.property(PropertyMonitorAccount)
	if account == "" {
		account = defaultMonitorAccount
	}
	s.ClusterRoleBindings = append(s.ClusterRoleBindings, clusterRoleBinding(objectMeta(c, "", MetricsReaderClusterRoleName, ""),
		MetricsReaderClusterRoleName, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}}))
}

// addMonitoring adds the ServiceMonitor and the PrometheusRule.
func (s *Strategy) addMonitoring(c *DeploymentConfig) error {
	sm, err := unstructuredObject(ServiceMonitorGVK, objectMeta(c, "", PrometheusRuleName, c.Namespace), serviceMonitorSpec(c))
	if err != nil {
		return err
	}
	sm.SetLabels(mergeMaps(sm.GetLabels(), map[string]string{PrometheusLabel: "true", "k8s-app": "kubevirt"}))
	s.ServiceMonitors = append(s.ServiceMonitors, sm)

	rule, err := unstructuredObject(PrometheusRuleGVK, objectMeta(c, "", PrometheusRuleName, c.Namespace),
		map[string]any{"groups": []ruleGroup{{Name: "kubevirt.rules", Rules: recordingRules(c)}, {Name: "kubevirt.alerts", Rules: alertRules(c)}}})
	if err != nil {
		return err
	}
	rule.SetLabels(mergeMaps(rule.GetLabels(), map[string]string{PrometheusLabel: "true", "prometheus": "k8s", "role": "alert-rules"}))
	s.PrometheusRules = append(s.PrometheusRules, rule)
	return nil
}

// serviceMonitorSpec scrapes the pods behind PrometheusServiceName, as
// KubeVirt's ServiceMonitor does (its port "metrics", honouring the
// metrics' own labels, so a VMI's namespace label stays the VMI's), one
// endpoint per scheme. Every component serves HTTPS and asks the API server
// whether the scraper may get /metrics: Prometheus presents its service
// account's token (bearerTokenFile, as kube-prometheus scrapes
// kube-controller-manager). The certificates are not verified, as in
// KubeVirt: virt-handler's is issued by the installation's own CA, which
// Prometheus does not know, and virt-controller's and virt-operator's are
// self-signed at every start.
func serviceMonitorSpec(c *DeploymentConfig) map[string]any {
	byScheme := map[string][]string{}
	var schemes []string
	for _, e := range metricsEndpoints {
		if byScheme[e.scheme] == nil {
			schemes = append(schemes, e.scheme)
		}
		byScheme[e.scheme] = append(byScheme[e.scheme], e.component)
	}
	var endpoints []any
	for _, scheme := range schemes {
		ep := map[string]any{
			"port":        "metrics",
			"path":        "/metrics",
			"scheme":      scheme,
			"honorLabels": true,
			"relabelings": []any{map[string]any{
				"sourceLabels": []any{"__meta_kubernetes_pod_label_" + promLabelName(v1.AppLabel)},
				"regex":        strings.Join(byScheme[scheme], "|"),
				"action":       "keep",
			}},
		}
		if scheme == "https" {
			ep["tlsConfig"] = map[string]any{"insecureSkipVerify": true}
			ep["bearerTokenFile"] = ServiceAccountTokenFile
		}
		endpoints = append(endpoints, ep)
	}
	return map[string]any{
		"selector":          map[string]any{"matchLabels": map[string]any{PrometheusLabel: "true"}},
		"namespaceSelector": map[string]any{"matchNames": []any{c.Namespace}},
		"endpoints":         endpoints,
	}
}

// promLabelName is how Prometheus's service discovery names a Kubernetes
// label: every character that is not a letter, digit or _ becomes _.
func promLabelName(label string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, label)
}

// ruleGroup and promRule are the PrometheusRule's spec.groups.
type ruleGroup struct {
	Name  string     `json:"name"`
	Rules []promRule `json:"rules"`
}

type promRule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// recordingRules are KubeVirt's recording rules of the metrics vmkit
// exports. The component counts come from Prometheus's up of each
// component's pods (KubeVirt's definition) and from the components' own
// ready and leading metrics.
func recordingRules(c *DeploymentConfig) []promRule {
	ns := c.Namespace
	up := func(component string) string {
		return fmt.Sprintf("sum(up{namespace='%s', pod=~'%s-.*'}) or vector(0)", ns, component)
	}
	sum := func(metric string) string {
		return fmt.Sprintf("sum(%s{namespace='%s'}) or vector(0)", metric, ns)
	}
	return []promRule{
		{Record: "cluster:kubevirt_virt_controller_up:sum", Expr: up(v1.VirtControllerValue)},
		{Record: "cluster:kubevirt_virt_controller_ready:sum", Expr: sum("kubevirt_virt_controller_ready_status")},
		{Record: "cluster:kubevirt_virt_controller_leading:sum", Expr: sum("kubevirt_virt_controller_leading_status")},
		{Record: "cluster:kubevirt_virt_handler_up:sum", Expr: up(v1.VirtHandlerValue)},
		{Record: "cluster:kubevirt_virt_operator_up:sum", Expr: up(v1.VirtOperatorValue)},
		{Record: "cluster:kubevirt_virt_operator_ready:sum", Expr: sum("kubevirt_virt_operator_ready_status")},
		{Record: "cluster:kubevirt_virt_operator_leading:sum", Expr: sum("kubevirt_virt_operator_leading_status")},
		{Record: "node:kubevirt_vmi_phase:sum", Expr: "sum by (node, phase, os, workload, flavor, instance_type, preference, " +
			"guest_os_kernel_release, guest_os_machine, guest_os_arch, guest_os_name, guest_os_version_id) (kubevirt_vmi_info)"},
		{Record: "vmi:kubevirt_vmi_memory_used_bytes:sum", Expr: "sum by (name, namespace) (kubevirt_vmi_memory_available_bytes - kubevirt_vmi_memory_usable_bytes)"},
	}
}

// alertRules are KubeVirt's alerts where vmkit has what they watch, with
// KubeVirt's names, severities and runbooks, plus
// VirtualMachineInstanceWithoutLauncher, vmkit's own. Those on
// kube_* series need kube-state-metrics, as KubeVirt's do; without it they
// never fire.
func alertRules(c *DeploymentConfig) []promRule {
	ns := c.Namespace
	alert := func(name, expr, forDuration, severity, summary string) promRule {
		return promRule{
			Alert: name, Expr: expr, For: forDuration,
			Labels: map[string]string{
				"severity": severity, "operator_health_impact": severity,
				"kubernetes_operator_part_of": "kubevirt", "kubernetes_operator_component": "kubevirt",
			},
			Annotations: map[string]string{"summary": summary, "runbook_url": RunbookURLBase + name},
		}
	}
	rules := []promRule{
		alert("VirtControllerDown", "cluster:kubevirt_virt_controller_up:sum == 0", "10m", "critical",
			"No up virt-controller was detected for the last 10 min."),
		alert("NoReadyVirtController", "cluster:kubevirt_virt_controller_ready:sum == 0", "10m", "critical",
			"No ready virt-controller was detected for the last 10 min."),
		alert("VirtOperatorDown", "cluster:kubevirt_virt_operator_up:sum == 0", "10m", "critical",
			"All virt-operator servers are down."),
		alert("NoReadyVirtOperator", "cluster:kubevirt_virt_operator_ready:sum == 0", "10m", "critical",
			"No ready virt-operator was detected for the last 10 min."),
		alert("NoLeadingVirtOperator", "cluster:kubevirt_virt_operator_leading:sum == 0", "10m", "critical",
			"No leading virt-operator was detected for the last 10 min."),
		alert("VirtHandlerDown", "cluster:kubevirt_virt_handler_up:sum == 0", "10m", "critical",
			"All virt-handler servers are down."),
		alert("VirtHandlerDaemonSetRolloutFailing",
			fmt.Sprintf("(kube_daemonset_status_number_ready{namespace='%s', daemonset='%s'} - kube_daemonset_status_desired_number_scheduled{namespace='%s', daemonset='%s'}) != 0",
				ns, v1.VirtHandlerValue, ns, v1.VirtHandlerValue), "15m", "warning", "Some virt-handlers failed to roll out"),
		alert("OrphanedVirtualMachineInstances",
			"(((max by (namespace, node) (kube_pod_status_ready{condition='true',pod=~'virt-handler.*'} "+
				"* on(pod, namespace) group_left(node) max by(namespace,pod,node)(kube_pod_info{pod=~'virt-handler.*',node!=''})) ) == 1) "+
				"or (count by (namespace, node)( kube_pod_info{pod=~'virt-launcher.*',node!=''})*0)) == 0",
			"10m", "warning", "No ready virt-handler pod detected on node {{ $labels.node }} with running vmis for more than 10 minutes"),
	}
	if !c.WithoutVirtAPI {
		// virt-api is not scraped (see metricsEndpoints): KubeVirt's
		// VirtAPIDown, on its Deployment's available replicas.
		rules = append(rules, alert("VirtAPIDown",
			fmt.Sprintf("kube_deployment_status_replicas_available{namespace='%s', deployment='%s'} == 0", ns, v1.VirtAPIValue),
			"10m", "critical", "All virt-api servers are down."))
	}
	own := alert("VirtualMachineInstanceWithoutLauncher", "kubevirt_vmi_info{phase='running', vmi_pod=''} == 1", "5m", "warning",
		"VirtualMachineInstance {{ $labels.namespace }}/{{ $labels.name }} is Running without a running launcher pod on node {{ $labels.node }}")
	delete(own.Annotations, "runbook_url") // not one of KubeVirt's
	own.Annotations["description"] = "virt-controller sees no Running virt-launcher pod of the VMI on its node for 5 minutes: its guest is probably gone while the VMI still says Running."
	return append(rules, own)
}

// unstructuredObject is an object of a kind the strategy holds without its
// Go types (the Prometheus Operator's).
func unstructuredObject(gvk schema.GroupVersionKind, meta metav1.ObjectMeta, spec any) (*unstructured.Unstructured, error) {
	// Through JSON: the spec's Go values become the JSON types an
	// Unstructured holds.
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %s %s: %w", gvk.Kind, meta.Name, err)
	}
	var specJSON map[string]any
	if err := json.Unmarshal(data, &specJSON); err != nil {
		return nil, fmt.Errorf("installstrategy: %s %s: %w", gvk.Kind, meta.Name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": specJSON}}
	u.SetGroupVersionKind(gvk)
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetAnnotations(meta.Annotations)
	return u, nil
}

// MonitoringServed reports whether the cluster serves the Prometheus
// Operator's ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1),
// which Apply needs to apply the strategy's (ApplyOptions.Monitoring).
func MonitoringServed(d discovery.ServerResourcesInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(ServiceMonitorGVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("installstrategy: discovering %s: %w", ServiceMonitorGVK.GroupVersion(), err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Kind] = true
	}
	return served[ServiceMonitorGVK.Kind] && served[PrometheusRuleGVK.Kind], nil
}
