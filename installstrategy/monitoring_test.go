package installstrategy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The pods of the components Prometheus scrapes carry the well-known
// annotations with their metrics port and scheme; virt-api's do not.
func TestScrapeAnnotations(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, d := range s.Deployments {
		got[d.Name] = d.Spec.Template.Annotations
	}
	for _, d := range s.DaemonSets {
		got[d.Name] = d.Spec.Template.Annotations
	}
	objs, err := OperatorObjects(OperatorConfig{Image: "quay.io/kubevirt/virt-operator:v1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			got[d.Name] = d.Spec.Template.Annotations
		}
	}
	scrape := func(port, scheme string) map[string]string {
		return map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": port, "prometheus.io/path": "/metrics", "prometheus.io/scheme": scheme}
	}
	want := map[string]map[string]string{
		v1.VirtAPIValue:        nil,
		v1.VirtControllerValue: scrape("8080", "https"),
		v1.VirtHandlerValue:    scrape("8443", "https"),
		v1.VirtOperatorValue:   scrape("8187", "https"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod template annotations (-want +got):\n%s", diff)
	}
}

// rules returns the PrometheusRule's rules by record or alert name.
func rules(t *testing.T, s *Strategy) map[string]map[string]any {
	t.Helper()
	if len(s.PrometheusRules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(s.PrometheusRules))
	}
	groups, _, _ := unstructured.NestedSlice(s.PrometheusRules[0].Object, "spec", "groups")
	out := map[string]map[string]any{}
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			name, _ := rule["alert"].(string)
			if name == "" {
				name, _ = rule["record"].(string)
			}
			out[name] = rule
		}
	}
	return out
}

// The PrometheusRule holds KubeVirt's recording rules and alerts, each
// alert with KubeVirt's labels and its runbook; VirtAPIDown only where
// virt-api is installed. (docs' test checks that every metric they query
// is one vmkit exports.)
func TestPrometheusRule(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := rules(t, s)
	var alerts, records []string
	for name, r := range got {
		if _, ok := r["alert"]; ok {
			alerts = append(alerts, name)
			labels := r["labels"].(map[string]any)
			if labels["severity"] == nil || labels["kubernetes_operator_part_of"] != "kubevirt" {
				t.Errorf("alert %s: labels %v", name, labels)
			}
			ann := r["annotations"].(map[string]any)
			if ann["summary"] == nil || (name != "VirtualMachineInstanceWithoutLauncher" && ann["runbook_url"] != RunbookURLBase+name) {
				t.Errorf("alert %s: annotations %v", name, ann)
			}
			if _, err := time.ParseDuration(r["for"].(string)); err != nil {
				t.Errorf("alert %s: for %v", name, r["for"])
			}
		} else {
			records = append(records, name)
		}
		if expr, _ := r["expr"].(string); strings.Contains(expr, "namespace='") && !strings.Contains(expr, "namespace='kubevirt'") {
			t.Errorf("%s: expr %q names another namespace than the install's", name, expr)
		}
	}
	slices.Sort(alerts)
	slices.Sort(records)
	wantAlerts := []string{"NoLeadingVirtOperator", "NoReadyVirtController", "NoReadyVirtOperator", "OrphanedVirtualMachineInstances",
		"VirtAPIDown", "VirtControllerDown", "VirtHandlerDaemonSetRolloutFailing", "VirtHandlerDown", "VirtOperatorDown",
		"VirtualMachineInstanceWithoutLauncher"}
	if diff := cmp.Diff(wantAlerts, alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	wantRecords := []string{"cluster:kubevirt_virt_controller_leading:sum", "cluster:kubevirt_virt_controller_ready:sum", "cluster:kubevirt_virt_controller_up:sum",
		"cluster:kubevirt_virt_handler_up:sum", "cluster:kubevirt_virt_operator_leading:sum", "cluster:kubevirt_virt_operator_ready:sum",
		"cluster:kubevirt_virt_operator_up:sum", "node:kubevirt_vmi_phase:sum", "vmi:kubevirt_vmi_memory_used_bytes:sum"}
	if diff := cmp.Diff(wantRecords, records); diff != "" {
		t.Errorf("recording rules (-want +got):\n%s", diff)
	}

	cfg := testConfig()
	cfg.WithoutVirtAPI = true
	without, err := Generate(cfg.SetID())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rules(t, without)["VirtAPIDown"]; ok {
		t.Error("VirtAPIDown in an installation without virt-api")
	}
}

// monitoringCRDs are stand-ins of the Prometheus Operator's CRDs: the
// kinds, schemaless.
func monitoringCRDs() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, k := range []struct{ kind, plural string }{{"ServiceMonitor", "servicemonitors"}, {"PrometheusRule", "prometheusrules"}} {
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + "." + MonitoringGroup},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: MonitoringGroup, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, ListKind: k.kind + "List", Plural: k.plural, Singular: strings.ToLower(k.kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr(true)}}}},
			},
		})
	}
	return out
}

// With the Prometheus Operator's CRDs, MonitoringServed says so and Apply
// writes the ServiceMonitor and the PrometheusRule, puts a changed rule
// back, and Delete removes them.
func TestApplyMonitoring(t *testing.T) {
	c := startCluster(t)
	ctx := ctxFor(t)
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if served, err := MonitoringServed(c.env.Kube.Discovery()); err != nil || served {
		t.Fatalf("MonitoringServed without the CRDs = %v, %v; want false", served, err)
	}
	for _, crd := range monitoringCRDs() {
		if _, err := c.env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("the monitoring kinds to be served", func() bool {
		served, err := MonitoringServed(c.env.Kube.Discovery())
		return err == nil && served
	})
	res, err := Apply(ctx, c.dyn, s, ApplyOptions{Monitoring: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 0 || !slices.Contains(res.Created, "PrometheusRule kubevirt/"+PrometheusRuleName) || !slices.Contains(res.Created, "ServiceMonitor kubevirt/"+PrometheusRuleName) {
		t.Fatalf("Apply with Monitoring: created %v, skipped %v", res.Created, res.Skipped)
	}
	rule := c.dyn.Resource(PrometheusRuleGVK.GroupVersion().WithResource("prometheusrules")).Namespace("kubevirt")
	live, err := rule.Get(ctx, PrometheusRuleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.PrometheusRules[0].Object["spec"], live.Object["spec"]); diff != "" {
		t.Errorf("stored PrometheusRule spec (-want +got):\n%s", diff)
	}
	if again, err := Apply(ctx, c.dyn, s, ApplyOptions{Monitoring: true}); err != nil || again.Writes() != 0 {
		t.Errorf("second Apply: %+v, %v; want no write", again, err)
	}
	_ = unstructured.SetNestedSlice(live.Object, []any{}, "spec", "groups")
	if _, err := rule.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := Apply(ctx, c.dyn, s, ApplyOptions{Monitoring: true})
	if err != nil || !cmp.Equal(again.Updated, []string{"PrometheusRule kubevirt/" + PrometheusRuleName}) {
		t.Errorf("Apply after the rules were emptied: updated %v, %v; want the PrometheusRule", again.Updated, err)
	}
	deadline := time.Now().Add(3 * time.Minute) // CRD finalizers are slow on a loaded machine
	for {
		res, err := Delete(ctx, c.dyn, s, DeleteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Remaining) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still present after 3 minutes: %v", res.Remaining)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := rule.Get(ctx, PrometheusRuleName, metav1.GetOptions{}); err == nil {
		t.Error("the PrometheusRule is left after Delete")
	}
}

// TestServiceMonitorAuthenticates: every component serves /metrics over
// HTTPS to authorized scrapers only, so the ServiceMonitor scrapes all
// three with Prometheus's service account token and without verifying
// their certificates (self-signed, or the installation's CA).
func TestServiceMonitorAuthenticates(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ServiceMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(s.ServiceMonitors))
	}
	endpoints, _, _ := unstructured.NestedSlice(s.ServiceMonitors[0].Object, "spec", "endpoints")
	want := []any{map[string]any{
		"port": "metrics", "path": "/metrics", "scheme": "https", "honorLabels": true,
		"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"tlsConfig":       map[string]any{"insecureSkipVerify": true},
		"relabelings": []any{map[string]any{
			"sourceLabels": []any{"__meta_kubernetes_pod_label_kubevirt_io"},
			"regex":        "virt-controller|virt-handler|virt-operator",
			"action":       "keep",
		}},
	}}
	if diff := cmp.Diff(want, endpoints); diff != "" {
		t.Errorf("ServiceMonitor endpoints (-want +got):\n%s", diff)
	}
}

// TestMetricsReader: the strategy ships a ClusterRole granting get on
// /metrics, and binds it to Prometheus's service account only where the
// KubeVirt CR names its namespace (monitorAccount defaulting to
// KubeVirt's prometheus-k8s).
func TestMetricsReader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  []rbacv1.Subject
	}{
		{name: "no monitor namespace"},
		{name: "only the account", props: map[string]string{PropertyMonitorAccount: "prometheus"}},
		{name: "monitor namespace", props: map[string]string{PropertyMonitorNamespace: "monitoring"},
			want: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}},
		{name: "monitor namespace and account", props: map[string]string{PropertyMonitorNamespace: "openshift-monitoring", PropertyMonitorAccount: "prometheus"},
			want: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "openshift-monitoring"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.AdditionalProperties = tc.props
			s, err := Generate(cfg.SetID())
			if err != nil {
				t.Fatal(err)
			}
			var role *rbacv1.ClusterRole
			for _, r := range s.ClusterRoles {
				if r.Name == MetricsReaderClusterRoleName {
					role = r
				}
			}
			if role == nil {
				t.Fatalf("no ClusterRole %s", MetricsReaderClusterRoleName)
			}
			if diff := cmp.Diff([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, role.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			var got []rbacv1.Subject
			for _, b := range s.ClusterRoleBindings {
				if b.RoleRef.Name == MetricsReaderClusterRoleName {
					got = append(got, b.Subjects...)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("bound to (-want +got):\n%s", diff)
			}
		})
	}
}
