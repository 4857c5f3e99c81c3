// Package docs holds vmkit's documentation; its test checks that what the
// documentation promises about metrics holds: every PromQL expression of
// the Grafana dashboard (grafana/*.json) and of the install strategy's
// PrometheusRule parses and queries only metrics and labels vmkit exports
// (or that Prometheus and kube-state-metrics provide), and metrics.md lists
// every metric vmkit exports with its labels.
package docs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/nodeagent"
	"github.com/vmkit/vmkit/podtemplate"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmcontrol"
	"github.com/vmkit/vmkit/vmcontrol/operator"
)

// family is a metric family as its collector describes it.
type family struct {
	component string
	labels    []string
}

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: ".*", constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// described returns the families the collector describes, by name (from
// Desc.String, the only way client_golang tells a Desc's name).
func described(t *testing.T, component string, c prometheus.Collector, into map[string]family) {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1000)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		into[m[1]] = family{component, labels}
	}
}

// exported returns every metric family vmkit's components export: the
// node agent's (virt-handler), the controller manager's (virt-controller)
// and the operator's.
func exported(t *testing.T) map[string]family {
	t.Helper()
	out := map[string]family{}
	agent, err := nodeagent.New(nodeagent.Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(), Kube: fake.NewClientset(), ShareDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	described(t, "virt-handler", agent.Registry(), out)
	m, err := vmcontrol.NewManager(vmcontrol.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, PodTemplate: &podtemplate.Config{LauncherImage: "vmkit/virt-launcher:test"}})
	if err != nil {
		t.Fatal(err)
	}
	described(t, "virt-controller", m.Registry(), out)
	reg := prometheus.NewRegistry()
	if err := operator.NewMetrics().Register(reg); err != nil {
		t.Fatal(err)
	}
	described(t, "virt-operator", reg, out)
	return out
}

// prometheusRule returns the install strategy's recording and alerting
// rules: record or alert name → expression.
func prometheusRule(t *testing.T) (records, alerts map[string]string) {
	t.Helper()
	cfg := &installstrategy.DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0"}
	s, err := installstrategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	records, alerts = map[string]string{}, map[string]string{}
	for _, r := range s.PrometheusRules {
		groups, _, _ := unstructured.NestedSlice(r.Object, "spec", "groups")
		for _, g := range groups {
			for _, rule := range g.(map[string]any)["rules"].([]any) {
				rule := rule.(map[string]any)
				if name, ok := rule["record"].(string); ok {
					records[name] = rule["expr"].(string)
				} else {
					alerts[rule["alert"].(string)] = rule["expr"].(string)
				}
			}
		}
	}
	return records, alerts
}

// targetLabels are labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "endpoint", "container", "le"}

// grafanaVars are the dashboard's variables, replaced before parsing.
var grafanaVars = regexp.MustCompile(`\$__(rate_interval|interval|range)|\$\{?[a-zA-Z_]+\}?`)

// checkExpr parses expr and checks every metric it selects, and every
// label its selectors match on: a family vmkit exports (histogram series
// by their family), a series a recording rule records, or a series of a
// source allowed outside vmkit (prefix, such as kube_ for
// kube-state-metrics; "up" is Prometheus's own).
func checkExpr(t *testing.T, where, expr string, families map[string]family, records map[string]string, allowed ...string) {
	t.Helper()
	q := grafanaVars.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(v, "$__") {
			return "5m"
		}
		return "x"
	})
	e, err := metricsql.Parse(q)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	metricsql.VisitAll(e, func(sub metricsql.Expr) {
		me, ok := sub.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, filters := range me.LabelFilterss {
			name := ""
			for _, f := range filters {
				if f.Label == "__name__" {
					name = f.Value
				}
			}
			if name == "" {
				t.Errorf("%s: %q selects series without a metric name", where, expr)
				continue
			}
			if _, ok := records[name]; ok || name == "up" || slices.ContainsFunc(allowed, func(p string) bool { return strings.HasPrefix(name, p) }) {
				continue
			}
			fam, ok := families[name]
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suffix); !ok && cut {
					fam, ok = families[base]
				}
			}
			if !ok {
				t.Errorf("%s: %q queries %s, which vmkit does not export", where, expr, name)
				continue
			}
			for _, f := range filters {
				if f.Label != "__name__" && !slices.Contains(fam.labels, f.Label) && !slices.Contains(targetLabels, f.Label) {
					t.Errorf("%s: %q matches %s on label %s, which it does not have (labels %v)", where, expr, name, f.Label, fam.labels)
				}
			}
		}
	})
}

// dashboardExprs returns every query of a Grafana dashboard: the panels'
// targets (rows' nested panels too) and the variables' label_values
// queries (as the selector they read).
func dashboardExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	type panel struct {
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q target %s has no expression", path, p.Title, tg.RefID)
				}
				out["panel "+p.Title+" target "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // the query as a plain string
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", path, v.Name, q.Query)
			continue
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

// Every query of the dashboards parses and reads only what vmkit exports
// or records.
func TestDashboardsQueryExportedMetrics(t *testing.T) {
	families := exported(t)
	records, _ := prometheusRule(t)
	paths, err := filepath.Glob(filepath.Join("grafana", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dashboards in grafana/ (%v)", err)
	}
	for _, path := range paths {
		exprs := dashboardExprs(t, path)
		if len(exprs) < 10 {
			t.Errorf("%s: only %d queries", path, len(exprs))
		}
		for where, expr := range exprs {
			checkExpr(t, path+": "+where, expr, families, records)
		}
	}
}

// The PrometheusRule's expressions parse and read what vmkit exports, what
// the rule itself records, Prometheus's up and kube-state-metrics' kube_*.
func TestPrometheusRuleQueriesExportedMetrics(t *testing.T) {
	families := exported(t)
	records, alerts := prometheusRule(t)
	for name, expr := range records {
		checkExpr(t, "record "+name, expr, families, records, "kube_")
	}
	for name, expr := range alerts {
		checkExpr(t, "alert "+name, expr, families, records, "kube_")
	}
}

// metrics.md lists every kubevirt_* and vmkit_* family a component exports,
// in a table row "| `name` | type | labels | ... |" with its labels.
func TestMetricsDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_:]+)` \\|[^|]*\\|([^|]*)\\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[2]
		}
	}
	for name, fam := range exported(t) {
		if !strings.HasPrefix(name, "kubevirt_") && !strings.HasPrefix(name, "vmkit_") {
			continue
		}
		labels, ok := rows[name]
		if !ok {
			t.Errorf("metrics.md does not list %s (%s)", name, fam.component)
			continue
		}
		for _, l := range fam.labels {
			if !strings.Contains(labels, "`"+l+"`") {
				t.Errorf("metrics.md: %s lacks its label %s", name, l)
			}
		}
	}
}
