package installstrategy

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// writeCounter counts the requests that change something on the server.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		w.writes.Add(1)
	}
	return w.next.RoundTrip(req)
}

type cluster struct {
	env     *testenv.Env
	dyn     dynamic.Interface
	counter *writeCounter
}

// startCluster runs an API server without vmkit's CRDs (Apply installs
// them) and creates the install namespace.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	env := testenv.Start(t, testenv.Options{})
	counter := &writeCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &cluster{env: env, dyn: dyn, counter: counter}
}

// ctxFor is a test's context: 4 minutes, more than the 3 the tests wait for
// CRD finalizers, which are slow on a loaded machine.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestApplyAgainstAPIServer: the strategy passes a server-side dry run,
// applies for real, a second Apply makes no write at all, drift and
// strategy changes are written back, orphans are pruned and Delete removes
// everything.
func TestApplyAgainstAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := ctxFor(t)
	kube := c.env.Kube
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Without the Prometheus Operator's CRDs its kinds are skipped.
	monitoring := len(s.ServiceMonitors) + len(s.PrometheusRules)
	total := len(s.Objects()) - monitoring

	t.Run("dry run stores nothing", func(t *testing.T) {
		res, err := Apply(ctx, c.dyn, s, ApplyOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Created) != total {
			t.Errorf("dry run created %d objects, want %d: %v", len(res.Created), total, res.Created)
		}
		if _, err := kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after a dry run, Get(virt-api) = %v, want NotFound", err)
		}
	})

	t.Run("apply creates everything", func(t *testing.T) {
		c.counter.writes.Store(0)
		res, err := Apply(ctx, c.dyn, s, ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Created) != total || len(res.Updated)+len(res.Deleted) != 0 {
			t.Errorf("first Apply: created %d updated %v deleted %v, want %d created", len(res.Created), res.Updated, res.Deleted, total)
		}
		want := []string{"ServiceMonitor kubevirt/" + PrometheusRuleName, "PrometheusRule kubevirt/" + PrometheusRuleName}
		if diff := cmp.Diff(want, res.Skipped); diff != "" {
			t.Errorf("skipped without the Prometheus Operator's CRDs (-want +got):\n%s", diff)
		}
		t.Logf("first Apply: %d objects, %d write requests", total, c.counter.writes.Load())
		for _, d := range s.Deployments {
			live, err := kube.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if live.Annotations[GenerationAnnotation] != "1" || live.Generation != 1 {
				t.Errorf("%s: generation %d, annotation %q", d.Name, live.Generation, live.Annotations[GenerationAnnotation])
			}
		}
	})

	t.Run("without virt-api no VMI is admitted unchecked", func(t *testing.T) {
		// virt-api's webhook (failurePolicy Fail) stands between users and
		// the VMIs they create; no virt-api runs here.
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "unchecked", Namespace: "default"}}
		_, err := versioned.NewForConfigOrDie(c.env.Config).KubevirtV1().VirtualMachineInstances("default").Create(ctx, vmi, metav1.CreateOptions{})
		// The mutating webhook (presets) is called first.
		if err == nil || !strings.Contains(err.Error(), "virtualmachineinstances-mutator.kubevirt.io") {
			t.Fatalf("creating a VMI with virt-api down: %v, want a refusal by virt-api's mutating webhook", err)
		}
		if err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, MutatingWebhookName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The API server drops the deleted mutating webhook when its own
		// informer sees the deletion: a create may still meet it for a
		// moment on a loaded machine.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err = versioned.NewForConfigOrDie(c.env.Config).KubevirtV1().VirtualMachineInstances("default").Create(ctx, vmi, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "virtualmachineinstances-mutator.kubevirt.io") || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err == nil || !strings.Contains(err.Error(), "virtualmachineinstances-create-validator.kubevirt.io") {
			t.Fatalf("creating a VMI with virt-api down: %v, want a refusal by virt-api's validating webhook", err)
		}
		if _, err := Apply(ctx, c.dyn, s, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("VMI spec and status belong to the components", func(t *testing.T) {
		// Without virt-api running, its webhook refuses every VMI create:
		// out of the way for this test, put back by the next Apply.
		if err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ValidatingWebhookName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, MutatingWebhookName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testVMIUpdatePolicy(t, ctx, c.env.Config, s.Config.Namespace)
		if _, err := Apply(ctx, c.dyn, s, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("second apply writes nothing", func(t *testing.T) {
		c.counter.writes.Store(0)
		res, err := Apply(ctx, c.dyn, s, ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := c.counter.writes.Load(); n != 0 {
			t.Errorf("second Apply made %d write requests (updated %v, created %v, deleted %v), want 0", n, res.Updated, res.Created, res.Deleted)
		}
		if len(res.Unchanged) != total {
			t.Errorf("unchanged %d, want %d", len(res.Unchanged), total)
		}
	})

	t.Run("drift is put back", func(t *testing.T) {
		d, err := kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Template.Spec.Containers[0].Image = "evil/virt-controller:latest"
		if _, err := kube.AppsV1().Deployments("kubevirt").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, HandlerServiceAccount, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cr.Rules = append(cr.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		if _, err := kube.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// virt-handler's REST API opened to every pod.
		np, err := kube.NetworkingV1().NetworkPolicies("kubevirt").Get(ctx, HandlerNetworkPolicyName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np.Spec.Ingress[0].From = nil
		if _, err := kube.NetworkingV1().NetworkPolicies("kubevirt").Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.counter.writes.Store(0)
		res, err := Apply(ctx, c.dyn, s, ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"ClusterRole " + HandlerServiceAccount, "NetworkPolicy kubevirt/" + HandlerNetworkPolicyName, "Deployment kubevirt/virt-controller"}
		if diff := cmp.Diff(want, res.Updated); diff != "" {
			t.Errorf("updated (-want +got):\n%s", diff)
		}
		if n := c.counter.writes.Load(); n != 3 {
			t.Errorf("%d write requests, want 3", n)
		}
		np, _ = kube.NetworkingV1().NetworkPolicies("kubevirt").Get(ctx, HandlerNetworkPolicyName, metav1.GetOptions{})
		if len(np.Spec.Ingress) == 0 || len(np.Spec.Ingress[0].From) != 1 {
			t.Errorf("virt-handler's NetworkPolicy after Apply: %+v", np.Spec.Ingress)
		}
		d, _ = kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-controller", metav1.GetOptions{})
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "quay.io/kubevirt/virt-controller:v1.4.0" {
			t.Errorf("image after Apply %q", img)
		}
		if again, _ := Apply(ctx, c.dyn, s, ApplyOptions{}); again.Writes() != 0 || len(again.Updated) != 0 {
			t.Errorf("Apply after the fix still writes: %+v", again)
		}
	})

	t.Run("the APIService carries the CA bundle", func(t *testing.T) {
		testAPIServiceCABundle(t, ctx, c, s)
	})

	t.Run("a new version updates images and prunes orphans", func(t *testing.T) {
		orphan := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-retired", Namespace: "kubevirt", Labels: map[string]string{
			v1.ManagedByLabel: v1.ManagedByLabelOperatorValue, v1.AppLabel: "virt-retired",
		}}}
		if _, err := kube.CoreV1().ServiceAccounts("kubevirt").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.Version = "v1.5.0"
		next, err := Generate(cfg.SetID())
		if err != nil {
			t.Fatal(err)
		}
		res, err := Apply(ctx, c.dyn, next, ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Updated) != total {
			t.Errorf("updated %d objects, want all %d (their annotations changed)", len(res.Updated), total)
		}
		if diff := cmp.Diff([]string{"ServiceAccount kubevirt/kubevirt-retired"}, res.Deleted); diff != "" {
			t.Errorf("pruned (-want +got):\n%s", diff)
		}
		ds, err := kube.AppsV1().DaemonSets("kubevirt").Get(ctx, "virt-handler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := ds.Spec.Template.Spec.Containers[0].Image; img != "quay.io/kubevirt/virt-handler:v1.5.0" {
			t.Errorf("virt-handler image %q", img)
		}
		if again, _ := Apply(ctx, c.dyn, next, ApplyOptions{}); again.Writes() != 0 {
			t.Errorf("second Apply of the new version writes: %+v", again)
		}
		s = next
	})

	t.Run("delete removes everything", func(t *testing.T) {
		var res Result
		deadline := time.Now().Add(3 * time.Minute) // CRD finalizers are slow on a loaded machine
		for {
			if res, err = Delete(ctx, c.dyn, s, DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if len(res.Remaining) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(res.Remaining) > 0 {
			t.Fatalf("still present after 3 minutes: %v", res.Remaining)
		}
		for _, obj := range s.Objects() {
			k, _ := kindFor(obj.GetObjectKind().GroupVersionKind())
			if _, err := k.client(c.dyn, obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: Get after Delete = %v, want NotFound", describe(obj), err)
			}
		}
		// The cluster's own roles are untouched.
		if _, err := kube.RbacV1().ClusterRoles().Get(ctx, "system:auth-delegator", metav1.GetOptions{}); err != nil {
			t.Errorf("system:auth-delegator: %v", err)
		}
	})
}

// TestDeleteRefusesWhileVMsExist: with BlockUninstallIfWorkloadsExist
// nothing is removed while a VMI exists; RemoveWorkloads removes it.
func TestDeleteRefusesWhileVMsExist(t *testing.T) {
	c := startCluster(t)
	ctx := ctxFor(t)
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, c.dyn, s, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// No virt-api runs here to answer its webhook, which refuses every
	// VMI create without it.
	if err := c.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ValidatingWebhookName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, MutatingWebhookName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	vmi := map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": "guest", "namespace": "default", "finalizers": []any{v1.VirtualMachineControllerFinalizer}},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}},
	}
	if _, err := c.dyn.Resource(vmiResource).Namespace("default").Create(ctx, toU(vmi), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Delete(ctx, c.dyn, s, DeleteOptions{})
	if !errorsIs(err, ErrWorkloadsExist) {
		t.Fatalf("Delete = %v, want ErrWorkloadsExist", err)
	}
	if _, err := c.env.Kube.AppsV1().DaemonSets("kubevirt").Get(ctx, "virt-handler", metav1.GetOptions{}); err != nil {
		t.Errorf("refused Delete removed virt-handler: %v", err)
	}
	deadline := time.Now().Add(3 * time.Minute) // CRD finalizers are slow on a loaded machine
	for {
		res, err := Delete(ctx, c.dyn, s, DeleteOptions{UninstallStrategy: v1.KubeVirtUninstallStrategyRemoveWorkloads})
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
	list, err := c.env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range list.Items {
		names = append(names, crd.Name)
	}
	if slices.Contains(names, "virtualmachineinstances.kubevirt.io") {
		t.Errorf("CRDs left: %v", names)
	}
}

func toU(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// testVMIUpdatePolicy: with the strategy applied, the API server refuses a
// user's change to a VMI's spec or status (the ValidatingAdmissionPolicy
// VMIUpdatePolicyName) and lets the user change its labels, while the
// controller's service account may change its spec.
func testVMIUpdatePolicy(t *testing.T, ctx context.Context, admin *rest.Config, namespace string) {
	user, err := versioned.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	asController := rest.CopyConfig(admin)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + ControllerServiceAccount}
	controller, err := versioned.NewForConfig(asController)
	if err != nil {
		t.Fatal(err)
	}
	vmis := user.KubevirtV1().VirtualMachineInstances("default")
	// The caller deleted virt-api's webhooks; the API server may call them
	// for a moment more, until its informer sees the deletions.
	var created *v1.VirtualMachineInstance
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		created, err = vmis.Create(ctx, &v1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Name: "policy"},
			Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vmis.Delete(context.Background(), "policy", metav1.DeleteOptions{}) })
	grace := int64(7)
	// The API server loads a new policy within a second or so: retry until it refuses.
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for {
		vmi, err := vmis.Get(ctx, "policy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vmi.Spec.TerminationGracePeriodSeconds = &grace
		_, last = vmis.Update(ctx, vmi, metav1.UpdateOptions{})
		if last != nil || time.Now().After(deadline) {
			break
		}
		// Allowed before the policy was loaded: put it back and retry.
		vmi, _ = vmis.Get(ctx, "policy", metav1.GetOptions{})
		vmi.Spec = created.Spec
		if _, err := controller.KubevirtV1().VirtualMachineInstances("default").Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsForbidden(last) || !strings.Contains(last.Error(), "spec of a VirtualMachineInstance cannot be changed") {
		t.Fatalf("a user's spec change: %v, want Forbidden naming the spec", last)
	}
	vmi, err := vmis.Get(ctx, "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vmi.Status.Phase = v1.Running
	if _, err := vmis.Update(ctx, vmi, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "status of a VirtualMachineInstance") {
		t.Errorf("a user's status change: %v, want Forbidden naming the status", err)
	}
	vmi.Status.Phase = ""
	vmi.Labels = map[string]string{"team": "blue"}
	if _, err := vmis.Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a user's label change: %v, want it allowed", err)
	}
	vmi, err = vmis.Get(ctx, "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	vmi.Status.Phase = v1.Pending
	if _, err := controller.KubevirtV1().VirtualMachineInstances("default").Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the controller's spec and status change: %v, want it allowed", err)
	}
}

// testAPIServiceCABundle: Apply puts ApplyOptions.CABundle into the
// APIService, writes nothing more while it stays, rewrites the APIService
// alone when the CA is rotated, puts the bundle back when someone swaps it
// for insecureSkipTLSVerify, and leaves the strategy itself without it.
func testAPIServiceCABundle(t *testing.T, ctx context.Context, c *cluster, s *Strategy) {
	apiServices := c.dyn.Resource(apiregv1.SchemeGroupVersion.WithResource("apiservices"))
	name := "v1." + SubresourcesGroup
	live := func() (caBundle string, insecure bool) {
		t.Helper()
		u, err := apiServices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		caBundle, _, _ = unstructured.NestedString(u.Object, "spec", "caBundle")
		insecure, _, _ = unstructured.NestedBool(u.Object, "spec", "insecureSkipTLSVerify")
		return caBundle, insecure
	}
	apply := func(bundle []byte, want []string) {
		t.Helper()
		c.counter.writes.Store(0)
		res, err := Apply(ctx, c.dyn, s, ApplyOptions{CABundle: bundle})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res.Updated); diff != "" {
			t.Errorf("updated (-want +got):\n%s", diff)
		}
		if n := c.counter.writes.Load(); n != int64(len(want)) {
			t.Errorf("%d write requests, want %d", n, len(want))
		}
		got, insecure := live()
		if got != base64.StdEncoding.EncodeToString(bundle) || insecure {
			t.Errorf("APIService caBundle %q, insecureSkipTLSVerify %v; want the bundle and false", got, insecure)
		}
	}
	first, err := EnsureCertificates(ctx, c.dyn, s.Config.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	// virt-api's webhook configuration carries the same bundle.
	bundled := []string{"APIService " + name, "ValidatingWebhookConfiguration " + ValidatingWebhookName, "MutatingWebhookConfiguration " + MutatingWebhookName}
	apply(first.CABundle, bundled)
	apply(first.CABundle, nil)

	// A rotated CA: EnsureCertificates re-issues it when the old one expires.
	if err := DeleteCertificates(ctx, c.dyn, s.Config.Namespace); err != nil {
		t.Fatal(err)
	}
	rotated, err := EnsureCertificates(ctx, c.dyn, s.Config.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if string(rotated.CABundle) == string(first.CABundle) {
		t.Fatal("EnsureCertificates made the same CA twice")
	}
	apply(rotated.CABundle, bundled)
	hooks, err := c.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, ValidatingWebhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks.Webhooks {
		if string(h.ClientConfig.CABundle) != string(rotated.CABundle) {
			t.Errorf("webhook %s: caBundle is not the rotated CA", h.Name)
		}
	}
	mutators, err := c.env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, MutatingWebhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range mutators.Webhooks {
		if string(h.ClientConfig.CABundle) != string(rotated.CABundle) {
			t.Errorf("mutating webhook %s: caBundle is not the rotated CA", h.Name)
		}
	}

	u, err := apiServices.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "spec", "caBundle")
	if err := unstructured.SetNestedField(u.Object, true, "spec", "insecureSkipTLSVerify"); err != nil {
		t.Fatal(err)
	}
	if _, err := apiServices.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(rotated.CABundle, []string{"APIService " + name})

	for _, a := range s.APIServices {
		if a.Spec.CABundle != nil {
			t.Errorf("Apply changed the strategy: APIService %s has a caBundle", a.Name)
		}
	}
}
