package virtapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fakeAgent stands in for the node agents: it records the requests virt-api
// forwards.
type fakeAgent struct {
	mu   sync.Mutex
	seen []string
}

type fakeAgentDialer struct {
	*fakeAgent
	url string
}

func (d *fakeAgentDialer) Handler(context.Context, string) (string, *tls.Config, error) {
	return d.url, &tls.Config{InsecureSkipVerify: true}, nil //nolint:gosec // a test server on loopback
}

func (a *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Method+" "+r.URL.Path)
	a.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// TestAggregatedAPI runs virt-api behind a real kube-apiserver's aggregation
// layer: the APIService becomes Available, discovery lists the
// subresources, requests carry the user through the front proxy, and RBAC
// (the install strategy's kubevirt.io:view and kubevirt.io:edit, aggregated
// into view and edit) decides who may stop a VM.
func TestAggregatedAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	// Without aggregator routing kube-apiserver resolves the APIService's
	// Service itself, which lets an ExternalName Service point at virt-api
	// on loopback (endpoints may not).
	env := testenv.Start(t, testenv.Options{CRDs: all, APIServerArgs: []string{"--enable-aggregator-routing=false"}})
	ctx := t.Context()
	kv, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	// The install strategy's user-facing roles.
	strategy, err := installstrategy.Generate(&installstrategy.DeploymentConfig{Namespace: "kubevirt", Registry: "vmkit", Version: "devel"})
	if err != nil {
		t.Fatal(err)
	}
	var roles int
	for _, cr := range strategy.ClusterRoles {
		if strings.HasPrefix(cr.Name, "kubevirt.io:") {
			if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			roles++
		}
	}
	if roles < 3 {
		t.Fatalf("the install strategy has %d kubevirt.io:* cluster roles, want view, edit and admin", roles)
	}

	// virt-api on loopback with a self-signed certificate; kube-apiserver
	// reaches it through an ExternalName Service.
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("virt-api.default.svc", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	agent := &fakeAgent{}
	agentSrv := httptest.NewTLSServer(agent)
	t.Cleanup(agentSrv.Close)
	srv, err := New(Config{Kube: env.Kube, Kubevirt: kv, Handlers: &fakeAgentDialer{fakeAgent: agent, url: agentSrv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	serveCtx, stop := context.WithCancel(context.Background())
	stopped, err := srv.Serve(serveCtx, ServeOptions{BindAddress: "127.0.0.1", Port: port, CertFile: certFile, KeyFile: keyFile, Kubeconfig: env.KubeconfigPath})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-stopped })

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-api", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt(port)}}},
	}
	if _, err := env.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := aggregator.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	apiService := &apiregv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: Version + "." + Group},
		Spec: apiregv1.APIServiceSpec{
			Service:              &apiregv1.ServiceReference{Namespace: "default", Name: "virt-api", Port: ptr(int32(port))},
			Group:                Group,
			Version:              Version,
			CABundle:             certPEM,
			GroupPriorityMinimum: 1000,
			VersionPriority:      15,
		},
	}
	if _, err := agg.ApiregistrationV1().APIServices().Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := agg.ApiregistrationV1().APIServices().Get(ctx, apiService.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var last string
		for _, c := range got.Status.Conditions {
			if c.Type == apiregv1.Available {
				last = string(c.Status) + " " + c.Reason + ": " + c.Message
			}
		}
		if strings.HasPrefix(last, "True") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("APIService %s not Available after a minute: %s", apiService.Name, last)
		}
		time.Sleep(200 * time.Millisecond)
	}

	resources, err := env.Kube.Discovery().ServerResourcesForGroupVersion(Group + "/" + Version)
	if err != nil {
		t.Fatalf("discovery through kube-apiserver: %v", err)
	}
	if len(resources.APIResources) != len(subresources) {
		t.Errorf("discovery lists %d resources, want %d", len(resources.APIResources), len(subresources))
	}

	// Straight to virt-api without credentials: refused.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server
	resp, err := insecure.Do(mustRequest(t, http.MethodPut, "https://127.0.0.1:"+strconv.Itoa(port)+Prefix+"/namespaces/default/virtualmachines/vm/stop"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous PUT stop straight to virt-api: %d, want 401", resp.StatusCode)
	}

	vm := testVM(v1.RunStrategyAlways)
	vm.Namespace = "default"
	if _, err := kv.KubevirtV1().VirtualMachines("default").Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmi := testVMI(v1.Running)
	vmi.Namespace = "default"
	// The VMI has no status subresource, as in KubeVirt: the status is stored as created.
	if _, err := kv.KubevirtV1().VirtualMachineInstances("default").Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for user, role := range map[string]string{"viewer": "view", "editor": "edit"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := env.Kube.RbacV1().RoleBindings("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string) rest.Interface {
		cfg := rest.CopyConfig(env.Config)
		if user != "" {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		}
		return kubernetes.NewForConfigOrDie(cfg).Discovery().RESTClient()
	}
	put := func(user, path, body string) int {
		var code int
		_ = as(user).Put().AbsPath(Prefix+"/namespaces/default/"+path).SetHeader("Content-Type", "application/json").
			Body([]byte(body)).Do(ctx).StatusCode(&code)
		return code
	}
	strategyNow := func() v1.VirtualMachineRunStrategy {
		got, err := kv.KubevirtV1().VirtualMachines("default").Get(ctx, "vm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strategyOf(got)
	}

	// The aggregated roles only take effect once the cluster-role
	// aggregation controller has run; kube-controller-manager is not
	// running here, so bind the kubevirt.io roles too, as a cluster
	// without aggregation would.
	for user, role := range map[string]string{"viewer": "kubevirt.io:view", "editor": "kubevirt.io:edit"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-kubevirt", Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := env.Kube.RbacV1().RoleBindings("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// RBAC authorizes from a cache that follows the bindings a moment
	// later (under a cold make test's load the editor's first stop was
	// answered 403): wait until kube-apiserver lets the editor stop a VM.
	editorMayStop := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "editor", Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Group: Group,
			Resource: "virtualmachines", Subresource: "stop", Name: "vm"},
	}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		review, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, editorMayStop, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the editor may not stop a VM 30 s after its RoleBinding to kubevirt.io:edit: %+v", review.Status)
		}
	}

	if code := put("stranger", "virtualmachines/vm/stop", ""); code != http.StatusForbidden {
		t.Errorf("stop by a user without a role: %d, want 403", code)
	}
	if code := put("viewer", "virtualmachines/vm/stop", ""); code != http.StatusForbidden {
		t.Errorf("stop by a viewer: %d, want 403", code)
	}
	if code := put("editor", "virtualmachines/vm/stop", `{"dryRun":["All"]}`); code != http.StatusAccepted || strategyNow() != v1.RunStrategyAlways {
		t.Errorf("dry-run stop by an editor: %d, run strategy %s; want 202 and Always kept", code, strategyNow())
	}
	if code := put("editor", "virtualmachineinstances/vm/pause", ""); code != http.StatusOK {
		t.Errorf("pause by an editor: %d, want 200", code)
	}
	agent.mu.Lock()
	seen := strings.Join(agent.seen, ",")
	agent.mu.Unlock()
	if seen != "PUT /v1/namespaces/default/virtualmachineinstances/vm/pause" {
		t.Errorf("the node agent saw %q, want the pause forwarded", seen)
	}
	if code := put("editor", "virtualmachines/vm/stop", ""); code != http.StatusAccepted || strategyNow() != v1.RunStrategyHalted {
		t.Errorf("stop by an editor: %d, run strategy %s; want 202 and Halted", code, strategyNow())
	}

	// The web console's page is authorized as the serial console is: an
	// editor gets it, a viewer and a stranger do not.
	for user, want := range map[string]int{"editor": http.StatusOK, "viewer": http.StatusForbidden, "stranger": http.StatusForbidden} {
		var code int
		body, _ := as(user).Get().AbsPath(Prefix + "/namespaces/default/virtualmachineinstances/_/console/web/").Do(ctx).StatusCode(&code).Raw()
		if code != want || (want == http.StatusOK && !strings.Contains(string(body), `src="app.js"`)) {
			t.Errorf("the web console's page as %s: %d %.120q, want %d", user, code, body, want)
		}
	}

	// The validating webhook: kube-apiserver refuses a VMI no node could
	// run, naming the field, and admits a runnable one.
	registerVMIValidator(ctx, t, env, port, certPEM)
	bad := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: runnableSpec()}
	bad.Spec.Domain.Devices.Disks[0].Disk.Bus = "floppy"
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := kv.KubevirtV1().VirtualMachineInstances("default").Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "spec.domain.devices.disks[0].disk.bus") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating a VMI with an unknown disk bus: %v, want a refusal naming spec.domain.devices.disks[0].disk.bus", err)
		}
		time.Sleep(200 * time.Millisecond) // the webhook configuration takes effect asynchronously
	}
	good := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: "default"}, Spec: runnableSpec()}
	if _, err := kv.KubevirtV1().VirtualMachineInstances("default").Create(ctx, good, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("creating a runnable VMI through the webhook: %v", err)
	}
	// 513 sockets: admitted, as KubeVirt admits them, with a warning the
	// client sees naming the VMI and the field.
	warned := &warningRecorder{}
	warnCfg := rest.CopyConfig(env.Config)
	warnCfg.WarningHandler = warned
	kvWarned, err := versioned.NewForConfig(warnCfg)
	if err != nil {
		t.Fatal(err)
	}
	large := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "large", Namespace: "default"}, Spec: runnableSpec()}
	large.Spec.Domain.CPU = &v1.CPU{Sockets: 513}
	if _, err := kvWarned.KubevirtV1().VirtualMachineInstances("default").Create(ctx, large, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("creating a VMI with 513 sockets through the webhook: %v, want it admitted as KubeVirt admits it", err)
	} else if w := warned.all(); len(w) != 1 || !strings.HasPrefix(w[0], "VirtualMachineInstance default/large: spec.domain.cpu: ") {
		t.Errorf("creating a VMI with 513 sockets: warnings %q, want one naming VirtualMachineInstance default/large and spec.domain.cpu", w)
	}

	testPresetWebhook(t, ctx, env.Kube, kv, strategy, port, certPEM)
}

// testPresetWebhook installs the install strategy's mutating webhook
// configuration (pointed at the virt-api of the test) and creates VMIs
// through kube-apiserver: a VMI matching a preset's selector is stored with
// the preset's CPU and watchdog and its annotation, a VMI that matches no
// preset is stored unchanged, and two matching presets that disagree refuse
// the VMI.
func testPresetWebhook(t *testing.T, ctx context.Context, kube kubernetes.Interface, kv versioned.Interface, strategy *installstrategy.Strategy, port int, caBundle []byte) {
	if len(strategy.MutatingWebhooks) != 1 {
		t.Fatalf("the install strategy has %d mutating webhook configurations, want virt-api-mutator", len(strategy.MutatingWebhooks))
	}
	mutator := strategy.MutatingWebhooks[0].DeepCopy()
	for i := range mutator.Webhooks {
		svc := mutator.Webhooks[i].ClientConfig.Service
		if svc.Path == nil || *svc.Path != MutateVMIPath {
			t.Fatalf("webhook %s calls %v, want virt-api's %s", mutator.Webhooks[i].Name, svc.Path, MutateVMIPath)
		}
		svc.Namespace, svc.Port = "default", ptr(int32(port))
		mutator.Webhooks[i].ClientConfig.CABundle = caBundle
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutator, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	small := &v1.VirtualMachineInstancePreset{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "default"},
		Spec: v1.VirtualMachineInstancePresetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io/flavor": "small"}},
			Domain: &v1.DomainSpec{
				CPU:     &v1.CPU{Cores: 2},
				Devices: v1.Devices{Watchdog: &v1.Watchdog{Name: "wd", WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{Action: "poweroff"}}}},
			},
		},
	}
	presets := kv.KubevirtV1().VirtualMachineInstancePresets("default")
	if _, err := presets.Create(ctx, small, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmis := kv.KubevirtV1().VirtualMachineInstances("default")
	matching := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "preset-small", Namespace: "default", Labels: map[string]string{"kubevirt.io/flavor": "small"}}, Spec: runnableSpec()}
	var got *v1.VirtualMachineInstance
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		got, err = vmis.Create(ctx, matching, metav1.CreateOptions{})
		if err == nil && got.Annotations[PresetAnnotationPrefix+"small"] != "" {
			break
		}
		if err == nil { // created before the webhook configuration took effect
			if err := vmis.Delete(ctx, matching.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating a VMI a preset selects: %v, annotations %v; want the preset applied", err, got.GetAnnotations())
		}
		time.Sleep(200 * time.Millisecond) // the webhook configuration takes effect asynchronously
	}
	if got.Annotations[PresetAnnotationPrefix+"small"] != "kubevirt.io/v1" {
		t.Errorf("annotation %s = %q, want kubevirt.io/v1", PresetAnnotationPrefix+"small", got.Annotations[PresetAnnotationPrefix+"small"])
	}
	if got.Spec.Domain.CPU == nil || got.Spec.Domain.CPU.Cores != 2 {
		t.Errorf("stored VMI's cpu %+v, want the preset's 2 cores", got.Spec.Domain.CPU)
	}
	if w := got.Spec.Domain.Devices.Watchdog; w == nil || w.Name != "wd" || w.I6300ESB == nil || w.I6300ESB.Action != "poweroff" {
		t.Errorf("stored VMI's watchdog %+v, want the preset's i6300esb poweroff", w)
	}
	if len(got.Spec.Domain.Devices.Disks) != 1 || got.Spec.Domain.Resources.Requests.Memory().String() != "64Mi" {
		t.Errorf("stored VMI lost its own spec: disks %v, requests %v", got.Spec.Domain.Devices.Disks, got.Spec.Domain.Resources.Requests)
	}

	other := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "preset-none", Namespace: "default", Labels: map[string]string{"kubevirt.io/flavor": "large"}}, Spec: runnableSpec()}
	stored, err := vmis.Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Domain.CPU != nil || len(stored.Annotations) != 0 {
		t.Errorf("a VMI no preset selects was changed: cpu %+v, annotations %v", stored.Spec.Domain.CPU, stored.Annotations)
	}

	// A second preset for the same VMIs with other CPUs: KubeVirt refuses
	// the VMI rather than pick one.
	conflicting := small.DeepCopy()
	conflicting.Name = "four-cores"
	conflicting.Spec.Domain = &v1.DomainSpec{CPU: &v1.CPU{Cores: 4}}
	if _, err := presets.Create(ctx, conflicting, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := matching.DeepCopy()
	refused.Name = "preset-conflict"
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := vmis.Create(ctx, refused, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), `presets "small" and "four-cores" conflict: cpu differs`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating a VMI two conflicting presets select: %v, want a refusal naming both presets", err)
		}
		time.Sleep(200 * time.Millisecond) // the informer sees the new preset asynchronously
	}
}

// warningRecorder keeps the API server's warnings.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// registerVMIValidator makes kube-apiserver call the VMI create validator
// of the virt-api Service in namespace default on port, whose serving
// certificate is certPEM.
func registerVMIValidator(ctx context.Context, t *testing.T, env *testenv.Env, port int, certPEM []byte) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-api-validator"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "virtualmachineinstances-create-validator.kubevirt.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "virt-api", Path: ptr(ValidateVMIPath), Port: ptr(int32(port))},
				CABundle: certPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{v1.GroupName}, APIVersions: []string{"*"}, Resources: []string{"virtualmachineinstances"}},
			}},
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
