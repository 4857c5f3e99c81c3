package installstrategy

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestOperatorObjects(t *testing.T) {
	objs, err := OperatorObjects(OperatorConfig{Image: "vmkit/virt-operator:devel", HostNetwork: "127.0.0.1", WithoutVirtAPI: true,
		Env: map[string]string{"KV_IO_EXTRA_ENV_FOO": "bar"}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetName())
	}
	want := "Namespace kubevirt,CustomResourceDefinition kubevirts.kubevirt.io,ServiceAccount kubevirt-operator,ClusterRole kubevirt-operator,ClusterRoleBinding kubevirt-operator,Role kubevirt-operator,RoleBinding kubevirt-operator,Role kubevirt-operator,RoleBinding kubevirt-operator," +
		"ClusterRoleBinding kubevirt-operator-system-auth-delegator,RoleBinding kubevirt-operator-extension-apiserver-authentication-reader,Deployment virt-operator"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("objects:\n got %s\nwant %s", got, want)
	}
	d := objs[len(objs)-1].(*appsv1.Deployment)
	spec := d.Spec.Template.Spec
	if !spec.HostNetwork || *d.Spec.Replicas != 1 {
		t.Errorf("host network deployment: hostNetwork=%v replicas=%d, want true and 1", spec.HostNetwork, *d.Spec.Replicas)
	}
	env := map[string]string{}
	for _, e := range spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for name, value := range map[string]string{EnvOperatorImage: "vmkit/virt-operator:devel", EnvHostNetwork: "127.0.0.1", EnvWithoutVirtAPI: "true", "KV_IO_EXTRA_ENV_FOO": "bar"} {
		if env[name] != value {
			t.Errorf("env %s = %q, want %q", name, env[name], value)
		}
	}
	// What the operator's pod reads back is the config that was meant.
	getenv := func(name string) string {
		if name == EnvTargetInstallNamespace {
			return "kubevirt"
		}
		return env[name]
	}
	cfg, err := ConfigFromEnv(getenv, []string{"KV_IO_EXTRA_ENV_FOO=bar"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostNetwork != "127.0.0.1" || !cfg.WithoutVirtAPI || cfg.Registry != "vmkit" || cfg.Version != "devel" {
		t.Errorf("config from the operator's environment: %+v", cfg)
	}
	s, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.APIServices) != 0 || len(s.ValidatingWebhooks) != 0 || len(s.MutatingWebhooks) != 0 {
		t.Errorf("WithoutVirtAPI still installs %d APIServices, %d validating and %d mutating webhook configurations", len(s.APIServices), len(s.ValidatingWebhooks), len(s.MutatingWebhooks))
	}
	for _, dep := range s.Deployments {
		if dep.Name == "virt-api" {
			t.Error("WithoutVirtAPI still installs virt-api")
		}
		if !dep.Spec.Template.Spec.HostNetwork {
			t.Errorf("Deployment %s is not on the host network", dep.Name)
		}
	}
	for _, ds := range s.DaemonSets {
		if !ds.Spec.Template.Spec.HostNetwork || !strings.Contains(strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "), "--listen-address=127.0.0.1") {
			t.Errorf("DaemonSet %s: hostNetwork=%v args %v", ds.Name, ds.Spec.Template.Spec.HostNetwork, ds.Spec.Template.Spec.Containers[0].Args)
		}
	}

	if _, err := OperatorObjects(OperatorConfig{Image: "virt-operator"}); err == nil || !strings.Contains(err.Error(), "operator image") {
		t.Errorf("image without registry: err %v, want one naming the operator image", err)
	}
}

func TestOperatorManifest(t *testing.T) {
	data, err := OperatorManifest(OperatorConfig{Image: "quay.io/vmkit/virt-operator:v0.1.0", ImagePullPolicy: corev1.PullAlways})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")[1:] // after the header comment
	if len(docs) != 12 {
		t.Fatalf("%d documents, want 12", len(docs))
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict([]byte(docs[11]), d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.HostNetwork || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("default deployment: hostNetwork=%v replicas=%d pull=%s", d.Spec.Template.Spec.HostNetwork, *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].ImagePullPolicy)
	}
}

// TestOperatorRulesLeastPrivilege: what docs/installstrategy.md promises
// about the operator's own permissions. Secrets, ConfigMaps, Jobs, Leases
// and the workloads only in its namespace; no wildcard; bind only on the
// roles an installation binds, by name. (That they are enough is
// TestOperatorAgainstAPIServer in vmcontrol/operator, which runs the
// operator as its service account.)
func TestOperatorRulesLeastPrivilege(t *testing.T) {
	p, err := OperatorRules("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	type grant struct{ group, resource, verb string }
	grants := func(rules []rbacv1.PolicyRule) map[grant][]string {
		out := map[grant][]string{}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if g == "*" || res == "*" || v == "*" {
							t.Errorf("wildcard rule %+v", r)
						}
						out[grant{g, res, v}] = append(out[grant{g, res, v}], r.ResourceNames...)
					}
				}
			}
		}
		return out
	}
	cluster, ns, kubeSystem := grants(p.Cluster), grants(p.Namespace), grants(p.KubeSystem)
	for _, res := range []string{"secrets", "configmaps", "serviceaccounts", "services"} {
		if _, ok := cluster[grant{"", res, "get"}]; ok {
			t.Errorf("%s are readable cluster-wide", res)
		}
		if _, ok := ns[grant{"", res, "create"}]; !ok {
			t.Errorf("%s cannot be created in the operator's namespace", res)
		}
	}
	for _, g := range []grant{{"batch", "jobs", "create"}, {"coordination.k8s.io", "leases", "update"}, {"apps", "daemonsets", "update"}, {"rbac.authorization.k8s.io", "roles", "create"}} {
		if _, ok := cluster[g]; ok {
			t.Errorf("%v granted cluster-wide", g)
		}
		if _, ok := ns[g]; !ok {
			t.Errorf("%v not granted in the operator's namespace", g)
		}
	}
	// An installation with every optional binding (the metrics reader's).
	s, err := Generate(bindingsConfig("kubevirt"))
	if err != nil {
		t.Fatal(err)
	}
	checkBind := func(where string, got map[grant][]string, resource string, want []string) {
		t.Helper()
		names, ok := got[grant{"rbac.authorization.k8s.io", resource, "bind"}]
		if !ok {
			t.Errorf("%s: no bind on %s", where, resource)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s: bind on every %s, want only the ones an installation binds", where, resource)
		}
		for _, n := range want {
			if !slices.Contains(names, n) {
				t.Errorf("%s: may not bind %s %s, which the installation binds", where, resource, n)
			}
		}
		for _, n := range names {
			if !slices.Contains(want, n) {
				t.Errorf("%s: may bind %s %s, which the installation does not bind", where, resource, n)
			}
		}
	}
	var clusterRoles, roles, kubeSystemRoles []string
	for _, b := range s.ClusterRoleBindings {
		clusterRoles = appendNew(clusterRoles, b.RoleRef.Name)
	}
	for _, b := range s.RoleBindings {
		if b.Namespace == "kube-system" {
			kubeSystemRoles = appendNew(kubeSystemRoles, b.RoleRef.Name)
		} else {
			roles = appendNew(roles, b.RoleRef.Name)
		}
	}
	checkBind("ClusterRole", cluster, "clusterroles", clusterRoles)
	checkBind("Role in kubevirt", ns, "roles", roles)
	checkBind("Role in kube-system", kubeSystem, "roles", kubeSystemRoles)
	if !slices.Contains(clusterRoles, "system:auth-delegator") || !slices.Contains(kubeSystemRoles, "extension-apiserver-authentication-reader") {
		t.Errorf("the roles virt-api is bound to are missing: %v %v", clusterRoles, kubeSystemRoles)
	}
	if !slices.Contains(clusterRoles, MetricsReaderClusterRoleName) {
		t.Errorf("the operator may not bind %s to Prometheus's account: %v", MetricsReaderClusterRoleName, clusterRoles)
	}
}

// TestOperatorMayManageEveryObject: the operator's own permissions let it
// do to every object of a strategy what Apply and Delete do (read, list to
// prune, create, update, patch, delete), in the object's scope.
func TestOperatorMayManageEveryObject(t *testing.T) {
	p, err := OperatorRules("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	allows := func(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return len(r.ResourceNames) == 0 && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, obj := range s.Objects() {
		k, err := kindFor(obj.GetObjectKind().GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		rules := p.Cluster
		switch obj.GetNamespace() {
		case "":
		case "kube-system":
			rules = append(slices.Clone(rules), p.KubeSystem...)
		default:
			rules = append(slices.Clone(rules), p.Namespace...)
		}
		for _, verb := range []string{"get", "list", "create", "update", "patch", "delete"} {
			if !allows(rules, k.gvk.Group, k.resource, verb) {
				t.Errorf("the operator may not %s %s (%s)", verb, k.resource, describe(obj))
			}
		}
	}
}

// TestOperatorObjectsRelease: a release's operator, named by digest, carries
// its version and the other components' digests, which ConfigFromEnv reads
// back into the images every component runs; a bad digest or component is
// refused by name.
func TestOperatorObjectsRelease(t *testing.T) {
	d := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	cfg := OperatorConfig{
		Image:   "registry.example.com/vmkit/virt-operator@" + d('a'),
		Version: "v0.1.0",
		Digests: map[string]string{v1.VirtAPIValue: d('b'), v1.VirtControllerValue: d('c'), v1.VirtHandlerValue: d('d'), v1.VirtLauncherValue: d('e')},
	}
	objs, err := OperatorObjects(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, o := range objs {
		if dep, ok := o.(*appsv1.Deployment); ok {
			for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
		}
	}
	env[EnvTargetInstallNamespace] = "kubevirt" // the downward API's value
	got, err := ConfigFromEnv(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for component, want := range map[string]string{
		v1.VirtOperatorValue:   "registry.example.com/vmkit/virt-operator@" + d('a'),
		v1.VirtAPIValue:        "registry.example.com/vmkit/virt-api@" + d('b'),
		v1.VirtControllerValue: "registry.example.com/vmkit/virt-controller@" + d('c'),
		v1.VirtHandlerValue:    "registry.example.com/vmkit/virt-handler@" + d('d'),
		v1.VirtLauncherValue:   "registry.example.com/vmkit/virt-launcher@" + d('e'),
	} {
		if img := got.Image(component); img != want {
			t.Errorf("%s runs %s, want %s", component, img, want)
		}
	}
	if got.Version != "v0.1.0" {
		t.Errorf("version %q, want v0.1.0", got.Version)
	}
	for _, bad := range []struct {
		cfg  OperatorConfig
		want string
	}{
		{OperatorConfig{Image: cfg.Image}, "has no tag: set the version"},
		{OperatorConfig{Image: cfg.Image, Version: "v1", Digests: map[string]string{"virt-nope": d('a')}}, `"virt-nope" is not virt-api`},
		{OperatorConfig{Image: cfg.Image, Version: "v1", Digests: map[string]string{v1.VirtAPIValue: "sha256:ABC"}}, `digests[virt-api]: "sha256:ABC" is not a digest`},
	} {
		if _, err := OperatorObjects(bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("OperatorObjects(%+v): %v, want an error with %q", bad.cfg, err, bad.want)
		}
	}
}

func TestKubeVirtManifest(t *testing.T) {
	data, err := KubeVirtManifest(DefaultKubeVirt(""))
	if err != nil {
		t.Fatal(err)
	}
	kv := &v1.KubeVirt{}
	if err := yaml.UnmarshalStrict(data, kv); err != nil {
		t.Fatal(err)
	}
	if kv.Kind != "KubeVirt" || kv.Name != "kubevirt" || kv.Namespace != DefaultNamespace || kv.Spec.ImagePullPolicy != corev1.PullIfNotPresent || kv.Spec.ImageTag != "" {
		t.Errorf("default KubeVirt CR:\n%s", data)
	}
}
