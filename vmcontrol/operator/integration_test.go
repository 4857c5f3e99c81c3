package operator_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/operator"
)

type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		w.writes.Add(1)
	}
	return w.next.RoundTrip(req)
}

// phases records every phase the KubeVirt CRs pass through, per name.
type phases struct {
	mu   sync.Mutex
	seen map[string][]v1.KubeVirtPhase
}

func (p *phases) record(obj any) {
	kv, ok := obj.(*v1.KubeVirt)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.seen[kv.Name]
	if len(list) == 0 || list[len(list)-1] != kv.Status.Phase {
		p.seen[kv.Name] = append(list, kv.Status.Phase)
	}
}

func (p *phases) of(name string) []v1.KubeVirtPhase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[name])
}

// TestOperatorAgainstAPIServer drives the KubeVirt CR through install,
// refusal of a second CR, an image tag update and uninstall against a real
// API server (no nodes: workloads exist but never become available).
func TestOperatorAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: all})
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	kube := env.Kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The controller runs as the operator's service account with only the
	// permissions the operator's own installation grants it
	// (installstrategy.OperatorObjects): installing, upgrading and
	// removing vmkit below is the check that they are enough.
	opObjs, err := installstrategy.OperatorObjects(installstrategy.OperatorConfig{Namespace: "kubevirt", Image: "quay.io/kubevirt/virt-operator:v1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	adminDyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opObjs {
		switch o.(type) {
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
		default:
			continue
		}
		if err := createObject(ctx, adminDyn, o); err != nil {
			t.Fatal(err)
		}
	}
	asOperator := rest.CopyConfig(env.Config)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kubevirt:" + installstrategy.OperatorServiceAccount}
	opKube, err := kubernetes.NewForConfig(asOperator)
	if err != nil {
		t.Fatal(err)
	}

	// The controller's clients count their writes.
	counter := &writeCounter{}
	cfg := rest.CopyConfig(asOperator)
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	test, err := versioned.NewForConfig(env.Config) // the test's own, uncounted
	if err != nil {
		t.Fatal(err)
	}
	opCfg := (&installstrategy.DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0"}).SetID()
	factory := externalversions.NewSharedInformerFactory(client, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(opKube, 0, kubeinformers.WithNamespace("kubevirt"),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = installstrategy.ManagedSelector }))
	// syncs counts the controller's syncs of the installed CR.
	var syncs atomic.Int64
	ctl, err := operator.New(operator.Config{
		Client: client, Dynamic: dyn, KubeVirts: factory.Kubevirt().V1().KubeVirts(),
		Deployments: kubeFactory.Apps().V1().Deployments(), DaemonSets: kubeFactory.Apps().V1().DaemonSets(),
		Operator: opCfg, Resync: time.Hour,
		Observe: func(key string, _ time.Duration, _ error) {
			if key == "kubevirt/kubevirt" {
				syncs.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := &phases{seen: map[string][]v1.KubeVirtPhase{}}
	if _, err := factory.Kubevirt().V1().KubeVirts().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen.record, UpdateFunc: func(_, obj any) { seen.record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	kubeFactory.Start(runCtx.Done())
	done := make(chan error, 1)
	go func() { done <- ctl.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
		factory.Shutdown()
		kubeFactory.Shutdown()
	})

	kvs := test.KubevirtV1().KubeVirts
	waitFor := func(t *testing.T, ns, name, what string, cond func(kv *v1.KubeVirt, err error) bool) *v1.KubeVirt {
		t.Helper()
		var last *v1.KubeVirt
		var lastErr error
		// Three minutes: deletion waits for the CRD finalizers, which back off
		// while CRD storage is (re)initializing on a loaded machine.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			last, lastErr = kvs(ns).Get(ctx, name, metav1.GetOptions{})
			return cond(last, lastErr), nil
		})
		if err != nil {
			t.Fatalf("KubeVirt %s/%s: waiting for %s: %v (last: %v, status %+v)", ns, name, what, err, lastErr, last)
		}
		return last
	}

	t.Run("install", func(t *testing.T) {
		// monitorNamespace: the operator binds the metrics reader to
		// Prometheus's account there (it may bind that role).
		if _, err := kvs("kubevirt").Create(ctx, &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"},
			Spec: v1.KubeVirtSpec{MonitorNamespace: "monitoring"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kv := waitFor(t, "kubevirt", "kubevirt", "phase Deployed", func(kv *v1.KubeVirt, err error) bool {
			return err == nil && kv.Status.Phase == v1.KubeVirtPhaseDeployed
		})
		if b, err := env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, installstrategy.MetricsReaderClusterRoleName, metav1.GetOptions{}); err != nil ||
			len(b.Subjects) != 1 || b.Subjects[0].Namespace != "monitoring" || b.Subjects[0].Name != "prometheus-k8s" {
			t.Errorf("ClusterRoleBinding %s: %+v, %v; want it binding monitoring/prometheus-k8s", installstrategy.MetricsReaderClusterRoleName, b, err)
		}
		if got := seen.of("kubevirt"); !slices.Contains(got, v1.KubeVirtPhaseDeploying) {
			t.Errorf("phases %v never showed Deploying", got)
		}
		if !slices.Contains(kv.Finalizers, v1.KubeVirtFinalizer) {
			t.Errorf("finalizers %v", kv.Finalizers)
		}
		st := kv.Status
		if st.TargetKubeVirtVersion != "v1.4.0" || st.ObservedKubeVirtVersion != "v1.4.0" || st.ObservedKubeVirtRegistry != "quay.io/kubevirt" ||
			st.TargetDeploymentID == "" || st.ObservedDeploymentID != st.TargetDeploymentID || st.OperatorVersion != "v1.4.0" {
			t.Errorf("status versions: %+v", st)
		}
		for typ, want := range map[v1.KubeVirtConditionType]corev1.ConditionStatus{
			v1.KubeVirtConditionCreated: corev1.ConditionTrue, v1.KubeVirtConditionSynchronized: corev1.ConditionTrue,
			v1.KubeVirtConditionDegraded: corev1.ConditionFalse,
			// No nodes: the Deployments never become available.
			v1.KubeVirtConditionAvailable: corev1.ConditionFalse, v1.KubeVirtConditionProgressing: corev1.ConditionTrue,
		} {
			if c := condition(kv, typ); c == nil || c.Status != want {
				t.Errorf("condition %s = %+v, want %s", typ, c, want)
			}
		}
		for _, name := range []string{"virt-api", "virt-controller"} {
			if _, err := kube.AppsV1().Deployments("kubevirt").Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("Deployment %s: %v", name, err)
			}
		}
		if _, err := kube.AppsV1().DaemonSets("kubevirt").Get(ctx, "virt-handler", metav1.GetOptions{}); err != nil {
			t.Errorf("DaemonSet virt-handler: %v", err)
		}
		crd, err := env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crds.VirtualMachine, metav1.GetOptions{})
		if err != nil || crd.Labels[v1.ManagedByLabel] != v1.ManagedByLabelOperatorValue {
			t.Errorf("CRD %s: %v, labels %v", crds.VirtualMachine, err, crd.Labels)
		}
		// virt-api has its serving certificate, and the aggregator verifies
		// it with the installation's CA, which the APIService carries.
		if _, err := kube.CoreV1().Secrets("kubevirt").Get(ctx, installstrategy.APIServerCertSecretName, metav1.GetOptions{}); err != nil {
			t.Errorf("Secret %s: %v", installstrategy.APIServerCertSecretName, err)
		}
		bundle, err := kube.CoreV1().ConfigMaps("kubevirt").Get(ctx, installstrategy.CABundleConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		apiService, err := dyn.Resource(apiregv1.SchemeGroupVersion.WithResource("apiservices")).Get(ctx, "v1."+installstrategy.SubresourcesGroup, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		caBundle, _, _ := unstructured.NestedString(apiService.Object, "spec", "caBundle")
		if want := base64.StdEncoding.EncodeToString([]byte(bundle.Data[installstrategy.CABundleKey])); caBundle != want || want == "" {
			t.Errorf("APIService caBundle %q, want the ConfigMap's CA bundle %q", caBundle, want)
		}
	})

	t.Run("a sync of an installed CR writes nothing", func(t *testing.T) {
		// The install's last writes, and the syncs their events trigger,
		// are over once the controller has not written for half a second.
		before := counter.writes.Load()
		quiet := time.Now()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			if n := counter.writes.Load(); n != before {
				before, quiet = n, time.Now()
			}
			return time.Since(quiet) >= 500*time.Millisecond, nil
		})
		if err != nil {
			t.Fatalf("the controller kept writing after the install: %v", err)
		}
		synced := syncs.Load()
		kv, err := kvs("kubevirt").Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kv.Annotations = map[string]string{"poke": "1"} // triggers a sync
		if _, err := kvs("kubevirt").Update(ctx, kv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// No write, checked throughout, until the controller has synced the
		// CR since and 2 seconds have passed.
		poked := time.Now()
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			if n := counter.writes.Load() - before; n != 0 {
				return false, fmt.Errorf("the controller made %d write requests re-syncing an installed CR, want 0", n)
			}
			return syncs.Load() > synced && time.Since(poked) >= 2*time.Second, nil
		})
		if err != nil {
			t.Fatalf("after the CR's annotation changed: %v (syncs of the CR: %d before the change, %d now)", err, synced, syncs.Load())
		}
	})

	t.Run("a second CR is refused", func(t *testing.T) {
		if _, err := kvs("default").Create(ctx, &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kv := waitFor(t, "default", "second", "condition MultipleKubeVirts", func(kv *v1.KubeVirt, err error) bool {
			c := condition(kv, v1.KubeVirtConditionSynchronized)
			return err == nil && c != nil && c.Status == corev1.ConditionFalse && c.Reason == operator.ReasonMultipleKubeVirts
		})
		if len(kv.Finalizers) != 0 || kv.Status.Phase != "" {
			t.Errorf("refused CR: finalizers %v, phase %q", kv.Finalizers, kv.Status.Phase)
		}
		t.Logf("message: %s", condition(kv, v1.KubeVirtConditionSynchronized).Message)
		if err := kvs("default").Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "default", "second", "deletion", func(_ *v1.KubeVirt, err error) bool { return apierrors.IsNotFound(err) })
	})

	t.Run("a new image tag rolls the components", func(t *testing.T) {
		kv, err := kvs("kubevirt").Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kv.Spec.ImageTag = "v1.5.0"
		if _, err := kvs("kubevirt").Update(ctx, kv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		kv = waitFor(t, "kubevirt", "kubevirt", "observed version v1.5.0", func(kv *v1.KubeVirt, err error) bool {
			return err == nil && kv.Status.ObservedKubeVirtVersion == "v1.5.0" && kv.Status.Phase == v1.KubeVirtPhaseDeployed
		})
		if kv.Status.ObservedDeploymentID == opCfg.ID {
			t.Errorf("observed ID did not change: %s", kv.Status.ObservedDeploymentID)
		}
		d, err := kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "quay.io/kubevirt/virt-controller:v1.5.0" {
			t.Errorf("virt-controller image %q", img)
		}
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--launcher-image=quay.io/kubevirt/virt-launcher:v1.5.0") {
			t.Errorf("virt-controller args %v", d.Spec.Template.Spec.Containers[0].Args)
		}
		ds, err := kube.AppsV1().DaemonSets("kubevirt").Get(ctx, "virt-handler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := ds.Spec.Template.Spec.Containers[0].Image; img != "quay.io/kubevirt/virt-handler:v1.5.0" {
			t.Errorf("virt-handler image %q", img)
		}
	})

	t.Run("delete removes everything and the finalizer", func(t *testing.T) {
		if err := kvs("kubevirt").Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "kubevirt", "kubevirt", "deletion", func(_ *v1.KubeVirt, err error) bool { return apierrors.IsNotFound(err) })
		got := seen.of("kubevirt")
		if i, j := slices.Index(got, v1.KubeVirtPhaseDeleting), slices.Index(got, v1.KubeVirtPhaseDeleted); i < 0 || j < i {
			t.Errorf("phases %v, want Deleting then Deleted", got)
		}
		if _, err := kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment virt-api after uninstall: %v", err)
		}
		if _, err := kube.CoreV1().ServiceAccounts("kubevirt").Get(ctx, installstrategy.HandlerServiceAccount, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ServiceAccount %s after uninstall: %v", installstrategy.HandlerServiceAccount, err)
		}
		if _, err := env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crds.VirtualMachine, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CRD %s after uninstall: %v", crds.VirtualMachine, err)
		}
		if _, err := env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crds.KubeVirt, metav1.GetOptions{}); err != nil {
			t.Errorf("the operator's own CRD %s is gone: %v", crds.KubeVirt, err)
		}
	})
}

func condition(kv *v1.KubeVirt, typ v1.KubeVirtConditionType) *v1.KubeVirtCondition {
	if kv == nil {
		return nil
	}
	for i := range kv.Status.Conditions {
		if kv.Status.Conditions[i].Type == typ {
			return &kv.Status.Conditions[i]
		}
	}
	return nil
}

// createObject creates o (a typed object of an installation) with c.
func createObject(ctx context.Context, c dynamic.Interface, o installstrategy.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: u}
	gvk := obj.GroupVersionKind()
	resource := strings.ToLower(gvk.Kind) + "s"
	gvr := gvk.GroupVersion().WithResource(resource)
	var ri dynamic.ResourceInterface = c.Resource(gvr)
	if ns := obj.GetNamespace(); ns != "" {
		ri = c.Resource(gvr).Namespace(ns)
	}
	if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}
