package crds_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
)

// quickStartEmulation is the patch of KubeVirt's quick start that turns on
// software emulation:
//
//	kubectl -n kubevirt patch kubevirt kubevirt --type=merge --patch '{"spec":{"configuration":{"developerConfiguration":{"useEmulation":true}}}}'
const quickStartEmulation = `{"spec":{"configuration":{"developerConfiguration":{"useEmulation":true}}}}`

var kubevirtsGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}

// kubectlFlags are kubectl's client flags (as kubectl makes them) for the
// test's API server, with a discovery cache of the test's own and without
// the deprecation warnings of the preset kind (which `all` lists).
func (c *cluster) kubectlFlags(t *testing.T) *genericclioptions.ConfigFlags {
	flags := genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(300).WithDiscoveryQPS(50.0)
	kubeconfig, cache := c.env.KubeconfigPath, t.TempDir()
	flags.KubeConfig, flags.CacheDir = &kubeconfig, &cache
	flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.WarningHandler = rest.NoWarnings{}
		return cfg
	}
	return flags
}

// resolveTypes returns the resources `kubectl get ARGS` reads, resolved by
// kubectl's own resource builder (k8s.io/cli-runtime: category expansion,
// then the discovery RESTMapper with kubectl's short-name expander), one
// "resource.group" per resource type, sorted.
func resolveTypes(flags *genericclioptions.ConfigFlags, ns string, args ...string) ([]string, error) {
	// kubectl get also flattens the lists; without that the builder gives
	// one Info per resource type, which is what is asked for here.
	infos, err := resource.NewBuilder(flags).Unstructured().NamespaceParam(ns).DefaultNamespace().
		ResourceTypeOrNameArgs(true, args...).Do().Infos()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, info := range infos {
		out = append(out, info.Mapping.Resource.GroupResource().String())
	}
	slices.Sort(out)
	return out, nil
}

// testKubectlNames resolves every name of KubeVirt's kinds as kubectl does:
// each plural, singular, kind, short name and <plural>.<group> is exactly
// its own resource; `kubevirt`, the KubeVirt kind's singular, is the KubeVirt
// resource and not a category; `kubectl patch kubevirt kubevirt` (KubeVirt's
// quick start) finds the one KubeVirt CR and patches it; the category all
// holds every namespaced kind, as KubeVirt's.
func (c *cluster) testKubectlNames(t *testing.T) {
	ctx := c.ctx(t)
	flags := c.kubectlFlags(t)
	const ns = "kubectl-names"
	if _, err := c.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A KubeVirt CR and a VM, both named kubevirt: with a category kubevirt
	// on both kinds, `kubectl get kubevirt` would list both.
	kv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt", "namespace": ns}, "spec": map[string]any{},
	}}
	vm := readSample(t, "vm-seed-v1alpha3.yaml")
	vm.SetName("kubevirt")
	vm.SetNamespace(ns)
	for _, obj := range []*unstructured.Unstructured{kv, vm} {
		gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
		if _, err := c.dyn.Resource(gv.WithResource(resources[obj.GetKind()])).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}

	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	var inAll []string
	for _, crd := range all {
		want := []string{crd.Spec.Names.Plural + "." + crd.Spec.Group}
		names := append([]string{crd.Spec.Names.Plural, crd.Spec.Names.Singular, crd.Spec.Names.Kind, want[0]}, crd.Spec.Names.ShortNames...)
		for _, name := range names {
			got, err := resolveTypes(flags, ns, name)
			if err != nil {
				t.Errorf("kubectl get %s: %v", name, err)
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("kubectl get %s reads other resources than %s (-want +got):\n%s", name, want[0], diff)
			}
		}
		if crd.Spec.Scope == "Namespaced" {
			inAll = append(inAll, want[0])
		}
	}

	// kubectl get all: every namespaced kind, as KubeVirt's (and no
	// cluster-scoped one).
	got, err := resolveTypes(flags, ns, "all")
	if err != nil {
		t.Fatalf("kubectl get all: %v", err)
	}
	got = slices.DeleteFunc(got, func(r string) bool { return !strings.HasSuffix(r, "kubevirt.io") })
	slices.Sort(inAll)
	if diff := cmp.Diff(inAll, got); diff != "" {
		t.Errorf("kubectl get all: the kubevirt.io resources differ from KubeVirt's (-want +got):\n%s", diff)
	}

	// kubectl -n kubevirt patch kubevirt kubevirt --type=merge --patch ...,
	// as kubectl patch builds its request.
	infos, err := resource.NewBuilder(flags).Unstructured().NamespaceParam(ns).DefaultNamespace().
		ResourceTypeOrNameArgs(false, "kubevirt", "kubevirt").Flatten().Do().Infos()
	if err != nil {
		t.Fatalf("kubectl patch kubevirt kubevirt: %v", err)
	}
	if len(infos) != 1 || infos[0].Mapping.Resource.GroupResource().String() != "kubevirts.kubevirt.io" || infos[0].Name != "kubevirt" {
		for _, info := range infos {
			t.Logf("found %s %s/%s", info.Mapping.Resource.GroupResource(), info.Namespace, info.Name)
		}
		t.Fatalf("kubectl patch kubevirt kubevirt: want the KubeVirt CR kubevirt alone, found %d objects", len(infos))
	}
	info := infos[0]
	if _, err := resource.NewHelper(info.Client, info.Mapping).Patch(ns, info.Name, types.MergePatchType, []byte(quickStartEmulation), nil); err != nil {
		t.Fatalf("kubectl patch kubevirt kubevirt: %v", err)
	}
	patched, err := c.dyn.Resource(kubevirtsGVR).Namespace(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if on, _, _ := unstructured.NestedBool(patched.Object, "spec", "configuration", "developerConfiguration", "useEmulation"); !on {
		t.Errorf("KubeVirt %s/kubevirt: useEmulation not set by the quick start's patch: %v", ns, patched.Object["spec"])
	}
}

// kubevirtCR is KubeVirt's release manifest kubevirt-cr.yaml.
const kubevirtCR = `apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
spec:
  certificateRotateStrategy: {}
  configuration:
    developerConfiguration:
      featureGates: []
  customizeComponents: {}
  imagePullPolicy: IfNotPresent
  workloadUpdateStrategy: {}
`

// quickStartVM is the VM of KubeVirt's quick start
// (kubevirt.io/labs/manifests/vm.yaml), as examples/vm-quickstart.yaml
// holds it unchanged.
func quickStartVM(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "vm-quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// enableFeatureGate is the manifest of KubeVirt's user guide, "Activating
// and deactivating feature gates".
const enableFeatureGate = `---
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
spec:
  configuration:
    developerConfiguration:
      featureGates:
        - LiveMigration
`

// testKubeVirtDocumentedCommands runs the kubectl commands of KubeVirt's
// quick start and user guide (installation, emulation, feature gates,
// updating, the quick-start VM) with the real kubectl against the CRDs, and
// checks each answers as on KubeVirt. No vmkit component runs: the KubeVirt
// CR's status is written by the test, as virt-operator would.
func (c *cluster) testKubeVirtDocumentedCommands(t *testing.T) {
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectlBin := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(kubectlBin); err != nil {
		t.Fatalf("no kubectl beside the control plane binaries (%v); install it with `make test-deps` (hack/setup-k8s.sh)", err)
	}
	dir, home := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{"kubevirt-cr.yaml": kubevirtCR, "vm.yaml": quickStartVM(t), "enable-feature-gate.yaml": enableFeatureGate,
		// kubectl edit's editor: turn emulation off again.
		"editor.sh": "#!/bin/sh\nsed -i 's/useEmulation: true/useEmulation: false/' \"$1\"\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kubectl := func(t *testing.T, want string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(c.ctx(t), kubectlBin, append([]string{"--kubeconfig", c.env.KubeconfigPath, "--cache-dir", filepath.Join(home, "cache")}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+home, "KUBE_EDITOR="+filepath.Join(dir, "editor.sh"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), want) {
			t.Fatalf("kubectl %s printed\n%s\nwant %q in it", strings.Join(args, " "), out, want)
		}
		return string(out)
	}
	kubevirtSpec := func(t *testing.T) map[string]any {
		t.Helper()
		var kv map[string]any
		out := kubectl(t, "", "-n", "kubevirt", "get", "kv", "kubevirt", "-o", "json")
		if err := json.Unmarshal([]byte(out), &kv); err != nil {
			t.Fatal(err)
		}
		spec, _ := kv["spec"].(map[string]any)
		return spec
	}

	ctx := c.ctx(t)
	if _, err := c.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "kubevirt.kubevirt.io/kubevirt created", "create", "-f", "kubevirt-cr.yaml")
	// What virt-operator reports once KubeVirt is deployed.
	kv, err := c.dyn.Resource(kubevirtsGVR).Namespace("kubevirt").Get(ctx, "kubevirt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv.Object["status"] = map[string]any{"phase": "Deployed", "observedKubeVirtVersion": "v1.8.4", "conditions": []any{
		map[string]any{"type": "Available", "status": "True", "reason": "AllComponentsReady", "message": "All components are ready."},
	}}
	if _, err := c.dyn.Resource(kubevirtsGVR).Namespace("kubevirt").UpdateStatus(ctx, kv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubectl(t, "kubevirt.kubevirt.io/kubevirt condition met", "-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available", "--timeout=30s")
	kubectl(t, "Deployed", "get", "kubevirt.kubevirt.io/kubevirt", "-n", "kubevirt", "-o=jsonpath={.status.phase}")
	kubectl(t, "v1.8.4", "get", "kubevirt.kubevirt.io/kubevirt", "-n", "kubevirt", "-o=jsonpath={.status.observedKubeVirtVersion}")
	kubectl(t, "kubevirt.kubevirt.io/kubevirt patched", "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type=merge", "--patch", quickStartEmulation)
	if dev, _ := kubevirtSpec(t)["configuration"].(map[string]any)["developerConfiguration"].(map[string]any); dev["useEmulation"] != true {
		t.Errorf("after the quick start's patch, developerConfiguration = %v, want useEmulation true", dev)
	}
	kubectl(t, "kubevirt.kubevirt.io/kubevirt edited", "edit", "kubevirt", "kubevirt", "-n", "kubevirt")
	kubectl(t, "kubevirt.kubevirt.io/kubevirt configured", "apply", "-f", "enable-feature-gate.yaml")
	dev, _ := kubevirtSpec(t)["configuration"].(map[string]any)["developerConfiguration"].(map[string]any)
	if want := map[string]any{"useEmulation": false, "featureGates": []any{"LiveMigration"}}; !cmp.Equal(want, dev) {
		t.Errorf("after kubectl edit and the feature gate's apply, developerConfiguration = %v, want %v", dev, want)
	}
	kubectl(t, "kubevirt.kubevirt.io/kubevirt patched", "patch", "kv", "kubevirt", "-n", "kubevirt", "--type=json", "-p", `[{ "op": "add", "path": "/spec/imageTag", "value": "v0.17.0" }]`)

	// The quick start's VM, in the same namespace: `kubectl get kubevirt`
	// still lists only the KubeVirt CR, `kubectl get all` both.
	kubectl(t, "virtualmachine.kubevirt.io/testvm created", "-n", "kubevirt", "apply", "-f", "vm.yaml")
	if out := kubectl(t, "", "get", "kubevirt", "-n", "kubevirt", "-o", "name"); out != "kubevirt.kubevirt.io/kubevirt\n" {
		t.Errorf("kubectl get kubevirt -n kubevirt -o name printed\n%s\nwant only kubevirt.kubevirt.io/kubevirt", out)
	}
	out := kubectl(t, "", "get", "all", "-n", "kubevirt", "-o", "name")
	for _, want := range []string{"kubevirt.kubevirt.io/kubevirt\n", "virtualmachine.kubevirt.io/testvm\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get all -n kubevirt -o name printed\n%s\nwant %q in it", out, want)
		}
	}
	kubectl(t, "testvm", "-n", "kubevirt", "get", "vms")
	kubectl(t, "No resources found", "-n", "kubevirt", "get", "vmis")
	kubectl(t, `virtualmachine.kubevirt.io "testvm" deleted`, "-n", "kubevirt", "delete", "vm", "testvm")
}
