package testenv

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var widgetGVR = schema.GroupVersionResource{Group: "testenv.vmkit.io", Version: "v1", Resource: "widgets"}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.testenv.vmkit.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "testenv.vmkit.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {
								Type:       "object",
								Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}},
							},
						},
					},
				},
			}},
		},
	}
}

func TestStart(t *testing.T) {
	env := Start(t, Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}})
	ctx := t.Context()

	t.Run("CRDEstablishedAndServed", func(t *testing.T) {
		crd, err := env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.testenv.vmkit.io", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get CRD: %v", err)
		}
		for _, want := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
			if c := findCRDCondition(crd, want); c == nil || c.Status != apiextensionsv1.ConditionTrue {
				t.Errorf("condition %s = %+v, want True", want, c)
			}
		}

		dyn, err := dynamic.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		widget := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "testenv.vmkit.io/v1",
			"kind":       "Widget",
			"metadata":   map[string]any{"name": "w1"},
			"spec":       map[string]any{"size": int64(3)},
		}}
		if _, err := dyn.Resource(widgetGVR).Namespace("default").Create(ctx, widget, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Widget: %v", err)
		}
		got, err := dyn.Resource(widgetGVR).Namespace("default").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get Widget: %v", err)
		}
		if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
			t.Errorf("Widget spec.size = %d, want 3", size)
		}
	})

	t.Run("InstallCRDsUpdatesExisting", func(t *testing.T) {
		crd := widgetCRD()
		crd.Spec.Names.ShortNames = []string{"wdg"}
		if err := env.InstallCRDs(ctx, crd); err != nil {
			t.Fatalf("InstallCRDs: %v", err)
		}
		got, err := env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"wdg"}, got.Spec.Names.ShortNames); diff != "" {
			t.Errorf("short names after update (-want +got):\n%s", diff)
		}
	})

	t.Run("InstallCRDsInvalidCRD", func(t *testing.T) {
		bad := widgetCRD()
		bad.Name = "gadgets.testenv.vmkit.io" // must be <plural>.<group>, and the plural is widgets
		err := env.InstallCRDs(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), `"gadgets.testenv.vmkit.io"`) {
			t.Errorf("InstallCRDs(invalid CRD) = %v, want an error naming the CRD", err)
		}
	})

	t.Run("ConfigMap", func(t *testing.T) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"},
			Data:       map[string]string{"answer": "42"},
		}
		if _, err := env.Kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ConfigMap: %v", err)
		}
		got, err := env.Kube.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get ConfigMap: %v", err)
		}
		if diff := cmp.Diff(cm.Data, got.Data); diff != "" {
			t.Errorf("ConfigMap data (-want +got):\n%s", diff)
		}
	})

	t.Run("AdminIdentity", func(t *testing.T) {
		tokenConfig := rest.AnonymousClientConfig(env.Config)
		tokenConfig.BearerToken = env.AdminToken
		tokenClient, err := kubernetes.NewForConfig(tokenConfig)
		if err != nil {
			t.Fatal(err)
		}
		for name, client := range map[string]kubernetes.Interface{"certificate": env.Kube, "token": tokenClient} {
			review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("%s: SelfSubjectReview: %v", name, err)
				continue
			}
			user := review.Status.UserInfo
			if user.Username != "admin" || !slices.Contains(user.Groups, "system:masters") {
				t.Errorf("%s: authenticated as %q in %v, want admin in system:masters", name, user.Username, user.Groups)
			}
		}
	})

	t.Run("KubeconfigFile", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath)
		if err != nil {
			t.Fatalf("load %s: %v", env.KubeconfigPath, err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list namespaces with the kubeconfig: %v", err)
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		for _, want := range []string{"default", "kube-system"} {
			if !slices.Contains(names, want) {
				t.Errorf("namespaces = %v, want %q among them", names, want)
			}
		}
	})

	// kube-apiserver publishes what an aggregated API server needs to
	// trust the requests it proxies: the front proxy's CA, its name and
	// the headers carrying the user.
	t.Run("AggregationConfigured", func(t *testing.T) {
		var data map[string]string
		eventually(t, 30*time.Second, func() (bool, string) {
			cm, err := env.Kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			data = cm.Data
			return data["requestheader-client-ca-file"] != "", fmt.Sprintf("data keys %v", slices.Sorted(maps.Keys(cm.Data)))
		})
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(data["requestheader-client-ca-file"])) {
			t.Fatalf("requestheader-client-ca-file holds no certificate: %q", data["requestheader-client-ca-file"])
		}
		// The proxy client certificate kube-apiserver presents verifies
		// against it, for the allowed name.
		pemData, err := os.ReadFile(filepath.Join(env.Dir, "pki", "front-proxy-client.crt"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(pemData)
		if block == nil {
			t.Fatal("front-proxy-client.crt holds no PEM block")
		}
		proxy, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proxy.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the proxy client certificate does not verify against requestheader-client-ca-file: %v", err)
		}
		for key, want := range map[string]string{
			"requestheader-allowed-names":        `["` + proxy.Subject.CommonName + `"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		} {
			if data[key] != want {
				t.Errorf("%s = %q, want %q", key, data[key], want)
			}
		}
		if proxy.Subject.CommonName != "front-proxy-client" {
			t.Errorf("proxy client certificate for %q, want front-proxy-client", proxy.Subject.CommonName)
		}
	})

	t.Run("StopClosesPortsAndRemovesDir", func(t *testing.T) {
		addrs := listenAddrs(t, env)
		for _, addr := range addrs {
			if !listening(addr) {
				t.Fatalf("nothing listens on %s before Stop", addr)
			}
		}
		began := time.Now()
		if err := env.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		t.Logf("Stop took %v", time.Since(began).Round(time.Millisecond))
		for _, addr := range addrs {
			if listening(addr) {
				t.Errorf("%s still accepts connections after Stop", addr)
			}
		}
		if _, err := os.Stat(env.Dir); !os.IsNotExist(err) {
			t.Errorf("run dir %s after Stop: %v, want it removed", env.Dir, err)
		}
		if err := env.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

// TestControlPlane checks that the controllers and the scheduler run: a new
// namespace gets its default ServiceAccount, owned objects (built-in and
// custom) are garbage collected, and a pod is judged unschedulable (there are
// no nodes).
func TestControlPlane(t *testing.T) {
	env := Start(t, Options{
		CRDs:                  []*apiextensionsv1.CustomResourceDefinition{widgetCRD()},
		WithControllerManager: true,
		WithScheduler:         true,
	})
	ctx := t.Context()
	const timeout = 60 * time.Second
	ns := "control-plane"
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("DefaultServiceAccount", func(t *testing.T) {
		eventually(t, timeout, func() (bool, string) {
			_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
	})

	t.Run("GarbageCollection", func(t *testing.T) {
		cms := env.Kube.CoreV1().ConfigMaps(ns)
		dyn, err := dynamic.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		widgets := dyn.Resource(widgetGVR).Namespace(ns)
		owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedBy := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: ownedBy}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "testenv.vmkit.io/v1", "kind": "Widget"}}
		widget.SetName("dependent")
		widget.SetOwnerReferences(ownedBy)
		if _, err := widgets.Create(ctx, widget, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() (bool, string) {
			_, cmErr := cms.Get(ctx, "dependent", metav1.GetOptions{})
			_, widgetErr := widgets.Get(ctx, "dependent", metav1.GetOptions{})
			return apierrors.IsNotFound(cmErr) && apierrors.IsNotFound(widgetErr),
				fmt.Sprintf("dependent ConfigMap: %v; dependent Widget: %v", cmErr, widgetErr)
		})
	})

	t.Run("SchedulerMarksPodUnschedulable", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pending"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		}
		// The ServiceAccount admission plugin needs the default ServiceAccount.
		eventually(t, timeout, func() (bool, string) {
			_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err == nil, fmt.Sprintf("create pod: %v", err)
		})
		eventually(t, timeout, func() (bool, string) {
			got, err := env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return true, ""
				}
			}
			return false, fmt.Sprintf("conditions %+v", got.Status.Conditions)
		})
	})
}

// TestStartFailsWithoutBinaries checks that a missing binary fails the test,
// never skips it, and that the message says what is missing and how to get it.
func TestStartFailsWithoutBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("with -short, Start skips instead of failing: there is no failure to see")
	}
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(rec, Options{WithScheduler: true})
	}()
	<-done
	for i := len(rec.cleanups) - 1; i >= 0; i-- {
		rec.cleanups[i]()
	}
	if rec.skipped {
		t.Error("Start skipped the test, want a failure")
	}
	for _, want := range []string{`"etcd"`, `"kube-apiserver"`, `"kube-scheduler"`, "make test-deps", "hack/setup-k8s.sh"} {
		if !strings.Contains(rec.fatal, want) {
			t.Errorf("Start failure message %q does not mention %s", rec.fatal, want)
		}
	}
}

func TestBinDir(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "/opt/k8s/bin")
	if got, err := BinDir(); err != nil || got != "/opt/k8s/bin" {
		t.Errorf("BinDir() with KUBEBUILDER_ASSETS = %q, %v; want /opt/k8s/bin", got, err)
	}

	t.Setenv("KUBEBUILDER_ASSETS", "")
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("ModuleRoot() = %s without go.mod: %v", root, err)
	}
	if got, err := BinDir(); err != nil || got != filepath.Join(root, "_output", "k8s-bin") {
		t.Errorf("BinDir() = %q, %v; want %s", got, err, filepath.Join(root, "_output", "k8s-bin"))
	}
}

// recordingTB stands in for a test that Start fails or skips: it records the
// outcome and ends the calling goroutine like the real methods do.
type recordingTB struct {
	testing.TB
	fatal    string
	skipped  bool
	cleanups []func()
}

func (r *recordingTB) Helper()               {}
func (r *recordingTB) Cleanup(f func())      { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool          { return r.fatal != "" }
func (r *recordingTB) Errorf(string, ...any) {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *recordingTB) FailNow()          { r.Fatalf("FailNow") }
func (r *recordingTB) SkipNow()          { r.skipped = true; runtime.Goexit() }
func (r *recordingTB) Skip(...any)       { r.SkipNow() }
func (r *recordingTB) Skipf(string, ...any) {
	r.SkipNow()
}

// listenAddrs returns the host:port of every server env runs.
func listenAddrs(t *testing.T, env *Env) []string {
	t.Helper()
	urls := []string{env.etcdClientURL, env.etcdPeerURL, env.Config.Host}
	for _, p := range env.procs {
		if p.name == "kube-controller-manager" || p.name == "kube-scheduler" {
			urls = append(urls, env.componentURLs[p.name])
		}
	}
	var addrs []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, u.Host)
	}
	return addrs
}

func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// eventually polls cond until it holds, failing the test with cond's last
// explanation after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still not true after %v: %s", timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStartPicksNewPortsWhenOneIsTaken: a port taken between its pick and
// etcd's bind (by another test package's connection or server) makes Start
// pick new ports, not fail the test.
func TestStartPicksNewPortsWhenOneIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[0] = taken.Addr().(*net.TCPAddr).Port // etcd's client port
		}
		return ports, err
	}
	t.Cleanup(func() { pickPorts = freePorts })
	env := Start(t, Options{})
	if calls != 2 {
		t.Errorf("ports picked %d times, want 2 (the first set had a taken port)", calls)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the control plane started on the second ports does not answer: %v", err)
	}
}

// TestFreePortsBelowEphemeralRange: the ports are distinct and outside the
// range outgoing connections take their local ports from.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	ports, err := freePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	low, high := portRange()
	seen := map[int]bool{}
	for _, p := range ports {
		if p < low || p >= high || seen[p] {
			t.Errorf("port %d: repeated or outside [%d, %d)", p, low, high)
		}
		seen[p] = true
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo int
		fmt.Sscan(string(b), &lo)
		if high > lo {
			t.Errorf("ports picked up to %d, in the ephemeral range from %d", high, lo)
		}
	}
}
