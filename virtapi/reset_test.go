package virtapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// recordingAgent is a node agent that records the requests virt-api
// forwards and answers each with code and body.
type recordingAgent struct {
	mu   sync.Mutex
	seen []string
	code int
	body string
	url  string
	tls  *tls.Config
}

func newRecordingAgent(t *testing.T) *recordingAgent {
	t.Helper()
	a := &recordingAgent{code: http.StatusOK}
	srv := httptest.NewTLSServer(a)
	t.Cleanup(srv.Close)
	a.url, a.tls = srv.URL, srv.Client().Transport.(*http.Transport).TLSClientConfig
	return a
}

func (a *recordingAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Method+" "+r.URL.Path)
	code, body := a.code, a.body
	a.mu.Unlock()
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func (a *recordingAgent) Handler(context.Context, string) (string, *tls.Config, error) {
	return a.url, a.tls, nil
}

// answer makes the agent answer code and body from now on.
func (a *recordingAgent) answer(code int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.code, a.body = code, body
}

// requests returns the requests forwarded so far and forgets them.
func (a *recordingAgent) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := a.seen
	a.seen = nil
	return seen
}

// TestReset: PUT .../virtualmachineinstances/{name}/reset goes to the node
// agent of the VMI's node for a Running VMI, paused or not, as KubeVirt's
// virt-api sends it to virt-handler; a VMI neither Running nor Scheduled
// gets KubeVirt's 400 without the agent being asked, and the agent's
// refusal of a Scheduled one reaches the user with its code and message.
// Discovery lists the subresource with the verb update.
func TestReset(t *testing.T) {
	const resetPath = "/namespaces/ns/virtualmachineinstances/vm/reset"
	const forwarded = "PUT /v1/namespaces/ns/virtualmachineinstances/vm/reset"
	paused := testVMI(v1.Running)
	paused.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
	pending := testVMI(v1.Pending)
	pending.Status.NodeName = ""
	for _, tc := range []struct {
		name      string
		vmi       *v1.VirtualMachineInstance
		agentCode int
		agentBody string
		wantCode  int
		wantMsg   string
		wantAgent bool
	}{
		{name: "running", vmi: testVMI(v1.Running), wantCode: http.StatusOK, wantAgent: true},
		{name: "paused", vmi: paused, wantCode: http.StatusOK, wantAgent: true},
		{name: "stopped", vmi: testVMI(v1.Succeeded), wantCode: http.StatusBadRequest,
			wantMsg: "Failed to reset non-running VMI with phase Succeeded: Unable to connect to VirtualMachineInstance because phase is Succeeded instead of Running or Scheduled"},
		{name: "failed", vmi: testVMI(v1.Failed), wantCode: http.StatusBadRequest,
			wantMsg: "Failed to reset non-running VMI with phase Failed: Unable to connect to VirtualMachineInstance because phase is Failed instead of Running or Scheduled"},
		{name: "pending, no node yet", vmi: pending, wantCode: http.StatusBadRequest,
			wantMsg: "Failed to reset non-running VMI with phase Pending: Unable to connect to VirtualMachineInstance because phase is Pending instead of Running or Scheduled"},
		{name: "scheduled, refused by the agent", vmi: testVMI(v1.Scheduled),
			agentCode: http.StatusConflict, agentBody: `{"code":409,"message":"VirtualMachineInstance ns/vm is not running (phase Scheduled)"}`,
			wantCode: http.StatusConflict, wantMsg: "VirtualMachineInstance ns/vm is not running (phase Scheduled)", wantAgent: true},
		{name: "the launcher fails", vmi: testVMI(v1.Running),
			agentCode: http.StatusInternalServerError, agentBody: `{"code":500,"message":"launcher: reset VMI ns/vm: QEMU is wedged (500)"}`,
			wantCode: http.StatusInternalServerError, wantMsg: "reset VMI ns/vm: QEMU is wedged", wantAgent: true},
		{name: "missing", wantCode: http.StatusNotFound, wantMsg: `"vm" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := newRecordingAgent(t)
			if tc.agentCode != 0 {
				agent.answer(tc.agentCode, tc.agentBody)
			}
			var objs []runtime.Object
			if tc.vmi != nil {
				objs = append(objs, tc.vmi)
			}
			ts := newTestServer(t, agent, objs...)
			code, st := ts.do(t, http.MethodPut, resetPath, "")
			if code != tc.wantCode || !strings.Contains(st.Message, tc.wantMsg) {
				t.Errorf("PUT reset: %d %q, want %d %q", code, st.Message, tc.wantCode, tc.wantMsg)
			}
			if code == http.StatusBadRequest && (st.Reason != metav1.StatusReasonBadRequest || st.Details == nil || st.Details.Name != "vm") {
				t.Errorf("PUT reset: status %+v, want reason BadRequest and details naming VMI vm", st)
			}
			got := agent.requests()
			if asked := len(got) > 0; asked != tc.wantAgent || (asked && (len(got) != 1 || got[0] != forwarded)) {
				t.Errorf("the node agent got %q, want it asked: %v (%s)", got, tc.wantAgent, forwarded)
			}
		})
	}

	var listed bool
	for _, r := range subresources {
		if r.Name == "virtualmachineinstances/reset" {
			listed = r.Namespaced && r.Kind == "VirtualMachineInstance" && len(r.Verbs) == 1 && r.Verbs[0] == "update"
		}
	}
	if !listed {
		t.Error("discovery does not list virtualmachineinstances/reset, namespaced, with the verb update")
	}
}

// TestResetAuthorization runs virt-api with the cluster's authentication
// and authorization (a real kube-apiserver, the install strategy's
// kubevirt.io roles): a reset is a SubjectAccessReview of update on
// virtualmachineinstances/reset in subresources.kubevirt.io, which a user
// without a role and a viewer are refused (403) and an editor is allowed,
// the reset then reaching the node agent.
func TestResetAuthorization(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: all})
	ctx := t.Context()
	kv, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	strategy, err := installstrategy.Generate(&installstrategy.DeploymentConfig{Namespace: "kubevirt", Registry: "vmkit", Version: "devel"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range strategy.ClusterRoles {
		if cr.Name == installstrategy.ViewClusterRoleName || cr.Name == installstrategy.EditClusterRoleName {
			if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	vmi := testVMI(v1.Running)
	vmi.Namespace = "default"
	if _, err := kv.KubevirtV1().VirtualMachineInstances("default").Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Users are service accounts, which virt-api authenticates with a
	// TokenReview, called straight (no aggregation layer needed).
	tokens := map[string]string{}
	for user, role := range map[string]string{"stranger": "", "viewer": installstrategy.ViewClusterRoleName, "editor": installstrategy.EditClusterRoleName} {
		if _, err := env.Kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := env.Kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, user, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[user] = tr.Status.Token
		if role == "" {
			continue
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: user, Namespace: "default"}},
		}
		if _, err := env.Kube.RbacV1().RoleBindings("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC follows the bindings a moment later, and virt-api caches a
	// decision for 10 s: ask virt-api only once kube-apiserver lets the
	// editor reset.
	editorMayReset := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:default:editor", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Group: Group,
			Resource: "virtualmachineinstances", Subresource: "reset", Name: "vm"},
	}}
	waitUntil(t, 30*time.Second, "the editor may reset a VMI", func() (bool, string) {
		review, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, editorMayReset, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return review.Status.Allowed, fmt.Sprintf("%+v", review.Status)
	})

	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("virt-api.default.svc", nil, []string{"localhost"})
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
	agent := newRecordingAgent(t)
	srv, err := New(Config{Kube: env.Kube, Kubevirt: kv, Handlers: agent})
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

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 20 * time.Second} //nolint:gosec // self-signed, loopback
	defer client.CloseIdleConnections()
	reset := func(user string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("https://127.0.0.1:%d%s/namespaces/default/virtualmachineinstances/vm/reset", port, Prefix), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokens[user])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, user := range []string{"stranger", "viewer"} {
		code, body := reset(user)
		if code != http.StatusForbidden || !strings.Contains(body, `cannot update resource \"virtualmachineinstances/reset\" in API group \"subresources.kubevirt.io\"`) {
			t.Errorf("reset by the %s: %d %s, want 403 for update on virtualmachineinstances/reset", user, code, body)
		}
	}
	if got := agent.requests(); len(got) != 0 {
		t.Errorf("the node agent got %q from refused users", got)
	}
	if code, body := reset("editor"); code != http.StatusOK {
		t.Errorf("reset by the editor: %d %s, want 200", code, body)
	}
	if got, want := agent.requests(), "PUT /v1/namespaces/default/virtualmachineinstances/vm/reset"; len(got) != 1 || got[0] != want {
		t.Errorf("the node agent got %q, want %q", got, want)
	}
}
