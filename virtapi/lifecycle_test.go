package virtapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func testVM(strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid"},
		Spec:       v1.VirtualMachineSpec{RunStrategy: &strategy, Template: &v1.VirtualMachineInstanceTemplateSpec{}},
	}
}

func testVMI(phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vmi-uid"},
		Status:     v1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "node0"},
	}
}

type testServer struct {
	srv  *Server
	kv   *fake.Clientset
	kube *kubefake.Clientset
	h    http.Handler
}

func newTestServer(t *testing.T, handlers HandlerDialer, objs ...runtime.Object) *testServer {
	t.Helper()
	var kubeObjs []runtime.Object
	var kvObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Pod, *corev1.PersistentVolumeClaim:
			kubeObjs = append(kubeObjs, o)
		default:
			kvObjs = append(kvObjs, o)
		}
	}
	ts := &testServer{kv: fake.NewSimpleClientset(kvObjs...), kube: kubefake.NewSimpleClientset(kubeObjs...)}
	if handlers == nil {
		handlers = noHandlers{}
	}
	srv, err := New(Config{Kube: ts.kube, Kubevirt: ts.kv, Handlers: handlers})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv, ts.h = srv, srv.Handler()
	return ts
}

type noHandlers struct{}

func (noHandlers) Handler(context.Context, string) (string, *tls.Config, error) {
	panic("no node agent in this test")
}

func (ts *testServer) do(t *testing.T, method, path, body string) (int, metav1.Status) {
	t.Helper()
	req := httptest.NewRequest(method, Prefix+path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, req)
	var st metav1.Status
	if rec.Code >= 300 {
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("%s %s: %d with a body that is no Status: %q", method, path, rec.Code, rec.Body.String())
		}
	}
	return rec.Code, st
}

func (ts *testServer) vm(t *testing.T) *v1.VirtualMachine {
	t.Helper()
	vm, err := ts.kv.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func strategyOf(vm *v1.VirtualMachine) v1.VirtualMachineRunStrategy {
	s, _ := vm.RunStrategy()
	return s
}

func TestStartStopRestart(t *testing.T) {
	uid := types.UID("vmi-uid")
	start := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	stop := v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}
	for _, tc := range []struct {
		name         string
		op, body     string
		vm           *v1.VirtualMachine
		vmi          *v1.VirtualMachineInstance
		wantCode     int
		wantMessage  string
		wantStrategy v1.VirtualMachineRunStrategy
		wantRequests []v1.VirtualMachineStateChangeRequest
	}{
		{name: "start Halted sets Always", op: "start", vm: testVM(v1.RunStrategyHalted), wantCode: 202, wantStrategy: v1.RunStrategyAlways},
		{name: "start Halted paused asks the controller", op: "start", body: `{"paused":true}`, vm: testVM(v1.RunStrategyHalted), wantCode: 202, wantStrategy: v1.RunStrategyHalted,
			wantRequests: []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest, Data: map[string]string{"paused": "true"}}}},
		{name: "start Manual records a request", op: "start", vm: testVM(v1.RunStrategyManual), wantCode: 202, wantStrategy: v1.RunStrategyManual,
			wantRequests: []v1.VirtualMachineStateChangeRequest{start}},
		{name: "start Manual after a stopped instance clears it first", op: "start", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Succeeded), wantCode: 202, wantStrategy: v1.RunStrategyManual,
			wantRequests: []v1.VirtualMachineStateChangeRequest{stop, start}},
		{name: "start of a running VM", op: "start", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Running), wantCode: 409, wantMessage: "VM is already running"},
		{name: "start Always", op: "start", vm: testVM(v1.RunStrategyAlways), wantCode: 409, wantMessage: "Always does not support manual start requests"},
		{name: "start RerunOnFailure after failure", op: "start", vm: testVM(v1.RunStrategyRerunOnFailure), vmi: testVMI(v1.Failed), wantCode: 409, wantMessage: "RerunOnFailure does not support starting VM from failed state"},
		{name: "start with a bad body", op: "start", body: `{"paused":"yes"}`, vm: testVM(v1.RunStrategyHalted), wantCode: 400, wantMessage: "decoding the request body"},
		{name: "start of a missing VM", op: "start", wantCode: 404, wantMessage: `"vm" not found`},

		{name: "stop Always sets Halted", op: "stop", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running), wantCode: 202, wantStrategy: v1.RunStrategyHalted},
		{name: "stop Once sets Halted", op: "stop", vm: testVM(v1.RunStrategyOnce), vmi: testVMI(v1.Running), wantCode: 202, wantStrategy: v1.RunStrategyHalted},
		{name: "stop Manual records a request", op: "stop", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Running), wantCode: 202, wantStrategy: v1.RunStrategyManual,
			wantRequests: []v1.VirtualMachineStateChangeRequest{stop}},
		{name: "stop Manual without an instance", op: "stop", vm: testVM(v1.RunStrategyManual), wantCode: 409, wantMessage: "VM is not running"},
		{name: "stop Halted without a shorter grace period", op: "stop", vm: testVM(v1.RunStrategyHalted), vmi: testVMI(v1.Running), wantCode: 409, wantMessage: "Halted only supports manual stop requests with a shorter graceperiod"},
		{name: "stop Halted forced", op: "stop", body: `{"gracePeriod":0}`, vm: testVM(v1.RunStrategyHalted), vmi: testVMI(v1.Running), wantCode: 202, wantStrategy: v1.RunStrategyHalted,
			wantRequests: []v1.VirtualMachineStateChangeRequest{stop}},
		{name: "stop with a negative grace period", op: "stop", body: `{"gracePeriod":-1}`, vm: testVM(v1.RunStrategyAlways), wantCode: 400, wantMessage: "gracePeriod -1"},

		{name: "restart Always", op: "restart", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running), wantCode: 202, wantStrategy: v1.RunStrategyAlways,
			wantRequests: []v1.VirtualMachineStateChangeRequest{stop, start}},
		{name: "restart Halted", op: "restart", vm: testVM(v1.RunStrategyHalted), wantCode: 409, wantMessage: "RunStategy Halted does not support manual restart requests"},
		{name: "restart without an instance", op: "restart", vm: testVM(v1.RunStrategyAlways), wantCode: 409, wantMessage: "VM is not running: Halted"},
		{name: "restart with a grace period", op: "restart", body: `{"gracePeriodSeconds":5}`, vm: testVM(v1.RunStrategyAlways), wantCode: 400, wantMessage: "only gracePeriod=0 is supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.vm != nil {
				objs = append(objs, tc.vm)
			}
			if tc.vmi != nil {
				objs = append(objs, tc.vmi)
			}
			ts := newTestServer(t, nil, objs...)
			code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/"+tc.op, tc.body)
			if code != tc.wantCode || !strings.Contains(st.Message, tc.wantMessage) {
				t.Fatalf("PUT %s = %d %q, want %d %q", tc.op, code, st.Message, tc.wantCode, tc.wantMessage)
			}
			if code >= 300 {
				if int(st.Code) != code || st.Kind != "Status" {
					t.Errorf("error body = %+v, want a Status with code %d", st, code)
				}
				return
			}
			vm := ts.vm(t)
			if got := strategyOf(vm); got != tc.wantStrategy {
				t.Errorf("run strategy = %s, want %s", got, tc.wantStrategy)
			}
			if diff := cmp.Diff(tc.wantRequests, vm.Status.StateChangeRequests); diff != "" {
				t.Errorf("stateChangeRequests (-want +got):\n%s", diff)
			}
		})
	}
}

// A second stop/start while one is pending is refused, as in KubeVirt.
func TestChangeRequestUnderway(t *testing.T) {
	vm := testVM(v1.RunStrategyManual)
	vm.Status.StateChangeRequests = []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest}}
	ts := newTestServer(t, nil, vm)
	code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/start", "")
	if code != http.StatusInternalServerError || !strings.Contains(st.Message, "stop/start already underway") {
		t.Fatalf("second start = %d %q, want 500 with \"stop/start already underway\"", code, st.Message)
	}
}

// spec.running (the older form) is patched in place of the run strategy.
func TestStopRunningField(t *testing.T) {
	vm := testVM(v1.RunStrategyAlways)
	vm.Spec.RunStrategy, vm.Spec.Running = nil, v1.BoolPtr(true)
	ts := newTestServer(t, nil, vm, testVMI(v1.Running))
	if code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/stop", ""); code != 202 {
		t.Fatalf("stop = %d %q", code, st.Message)
	}
	got := ts.vm(t)
	if got.Spec.Running == nil || *got.Spec.Running || got.Spec.RunStrategy != nil {
		t.Errorf("after stop: running=%v runStrategy=%v, want running=false and no runStrategy", got.Spec.Running, got.Spec.RunStrategy)
	}
}

func TestForcedStopShortensGracePeriod(t *testing.T) {
	vmi := testVMI(v1.Running)
	vmi.Spec.TerminationGracePeriodSeconds = ptr(int64(180))
	ts := newTestServer(t, nil, testVM(v1.RunStrategyAlways), vmi)
	if code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/stop", `{"gracePeriod":0}`); code != 202 {
		t.Fatalf("stop = %d %q", code, st.Message)
	}
	got, err := ts.kv.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Spec.TerminationGracePeriodSeconds; g == nil || *g != 0 {
		t.Errorf("VMI terminationGracePeriodSeconds = %v, want 0", g)
	}
}

func TestForcedRestartDeletesTheLauncher(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm-abcde", Namespace: "ns", Labels: map[string]string{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: "vmi-uid"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	ts := newTestServer(t, nil, testVM(v1.RunStrategyAlways), testVMI(v1.Running), pod)
	if code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/restart", `{"gracePeriodSeconds":0}`); code != 202 {
		t.Fatalf("restart = %d %q", code, st.Message)
	}
	pods, _ := ts.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("launcher pod still exists after a forced restart")
	}
}

func TestMigrate(t *testing.T) {
	ts := newTestServer(t, nil, testVM(v1.RunStrategyAlways), testVMI(v1.Running))
	if code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/migrate", ""); code != 202 {
		t.Fatalf("migrate = %d %q", code, st.Message)
	}
	l, _ := ts.kv.KubevirtV1().VirtualMachineInstanceMigrations("ns").List(context.Background(), metav1.ListOptions{})
	if len(l.Items) != 1 || l.Items[0].Spec.VMIName != "vm" || l.Items[0].GenerateName != "kubevirt-migrate-vm-" {
		t.Fatalf("migrations = %+v, want one for vm named kubevirt-migrate-vm-*", l.Items)
	}
	if code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/migrate", `{"addedNodeSelector":{"a":"b"}}`); code != 400 || !strings.Contains(st.Message, "addedNodeSelector") {
		t.Errorf("migrate with addedNodeSelector = %d %q, want 400 naming the field", code, st.Message)
	}
	ts = newTestServer(t, nil, testVM(v1.RunStrategyAlways), testVMI(v1.Scheduling))
	if code, st := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/migrate", ""); code != 409 || st.Message == "" {
		t.Errorf("migrate of a scheduling VMI = %d %q, want 409", code, st.Message)
	}
}

func TestUnknownSubresource(t *testing.T) {
	ts := newTestServer(t, nil, testVM(v1.RunStrategyAlways))
	if code, _ := ts.do(t, http.MethodPut, "/namespaces/ns/virtualmachines/vm/explode", ""); code != 404 {
		t.Errorf("unknown subresource = %d, want 404", code)
	}
}

func ptr[T any](v T) *T { return &v }

// The node agent's {code, message} answers reach the user as a Status with
// the same code, a matching reason and the agent's message.
func TestAgentError(t *testing.T) {
	err := agentError(http.StatusConflict, []byte(`{"code":409,"message":"VMI does not have a guest agent connected"}`))
	st, ok := err.(interface{ Status() metav1.Status })
	if !ok {
		t.Fatalf("%T is not a status error", err)
	}
	if s := st.Status(); s.Code != 409 || s.Reason != metav1.StatusReasonConflict || s.Message != "VMI does not have a guest agent connected" {
		t.Fatalf("status %+v", s)
	}
	if s := agentError(http.StatusBadGateway, []byte("connecting to the guest: refused")).(interface{ Status() metav1.Status }).Status(); s.Message != "connecting to the guest: refused" || s.Code != 502 {
		t.Fatalf("plain-text answer: %+v", s)
	}
}

// A stream the agent refuses before the upgrade (port-forward to a VMI
// without a pod network address) reaches the user with the agent's code
// and message, not as an internal error.
func TestStreamRefusalPassedOn(t *testing.T) {
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/portforward/22") {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"code":409,"message":"VMI has no pod network address"}`))
		}
	}))
	defer agent.Close()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01"}}
	s := &Server{cfg: Config{Handlers: fixedHandler{agent.URL, agent.Client().Transport.(*http.Transport).TLSClientConfig}}}
	_, err := s.dialAgent(context.Background(), vmi, "portforward/22")
	st, ok := err.(interface{ Status() metav1.Status })
	if !ok || st.Status().Code != http.StatusConflict || st.Status().Message != "VMI has no pod network address" {
		t.Fatalf("dialAgent = %v, want the agent's 409 and message", err)
	}
	// An agent that answers the plain request (it refused only the upgrade)
	// leaves the internal error.
	if _, err := s.dialAgent(context.Background(), vmi, "console"); err == nil || !strings.Contains(err.Error(), "opening console") {
		t.Fatalf("dialAgent(console) = %v, want the dial's error", err)
	}
}

// fixedHandler finds every node's agent at one URL.
type fixedHandler struct {
	url string
	tls *tls.Config
}

func (h fixedHandler) Handler(context.Context, string) (string, *tls.Config, error) {
	return h.url, h.tls, nil
}

// TestVMPortForward (#39): KubeVirt's virtctl port-forward, ssh and scp to
// vm/NAME call virtualmachines/{name}/portforward/{port}[/{protocol}]; it
// reaches the node agent of the VM's instance with the VMI's port-forward,
// and a VM without a running instance is refused.
func TestVMPortForward(t *testing.T) {
	var got []string
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path)
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"code":409,"message":"refused by the test agent"}`))
	}))
	defer agent.Close()
	handlers := fixedHandler{agent.URL, agent.Client().Transport.(*http.Transport).TLSClientConfig}
	ts := newTestServer(t, handlers, testVMI(v1.Running))
	for _, path := range []string{"/namespaces/ns/virtualmachines/vm/portforward/22", "/namespaces/ns/virtualmachines/vm/portforward/22/tcp"} {
		code, st := ts.do(t, http.MethodGet, path, "")
		if code != http.StatusConflict || st.Message != "refused by the test agent" {
			t.Errorf("GET %s: %d %q, want the agent's 409", path, code, st.Message)
		}
	}
	// (dialAgent asks again, without the upgrade, to read a refusal.)
	if want := []string{"/v1/namespaces/ns/virtualmachineinstances/vm/portforward/22", "/v1/namespaces/ns/virtualmachineinstances/vm/portforward/22/tcp"}; !slices.Equal(slices.Compact(got), want) {
		t.Errorf("the agent was asked for %q, want the VMI's port-forward %q", got, want)
	}
	stopped := newTestServer(t, nil)
	if code, st := stopped.do(t, http.MethodGet, "/namespaces/ns/virtualmachines/vm/portforward/22", ""); code != http.StatusNotFound {
		t.Errorf("a VM without an instance: %d %q, want 404", code, st.Message)
	}
}
