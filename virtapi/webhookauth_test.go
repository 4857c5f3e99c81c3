package virtapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	certutil "k8s.io/client-go/util/cert"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// webhookCaller is the user kube-apiserver presents to virt-api's webhooks
// in TestAuthenticatedWebhooks (its --admission-control-config-file
// names a kubeconfig with this user's token for every webhook).
const (
	webhookCaller      = "system:kube-apiserver-webhook-client"
	webhookCallerToken = "webhook-caller-token"
)

// TestAuthenticatedWebhooks runs virt-api with AuthenticateWebhooks behind
// a kube-apiserver configured to present a token to admission webhooks
// (#35 N5 stretch): a forged AdmissionReview posted straight to virt-api
// gets 401 without credentials and 403 from a service account that may
// not post to the path; kube-apiserver's own calls are refused until its
// user may post to the webhook's path, then the webhook runs (an invalid
// VMI is refused naming its field, a valid one admitted).
func TestAuthenticatedWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kube-apiserver's credentials for webhooks: a static token (testenv's
	// admin token file is replaced; the test's clients use the admin's
	// client certificate).
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tokens := write("tokens.csv", webhookCallerToken+","+webhookCaller+","+webhookCaller+"\n")
	kubeconfig := write("webhook-kubeconfig.yaml", `apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    token: `+webhookCallerToken+"\n")
	admission := write("admission.yaml", fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
`, kubeconfig))
	env := testenv.Start(t, testenv.Options{CRDs: all, APIServerArgs: []string{
		"--enable-aggregator-routing=false", "--token-auth-file=" + tokens, "--admission-control-config-file=" + admission,
	}})
	ctx := t.Context()
	kv, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("virt-api.default.svc", nil, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := write("tls.crt", string(certPEM)), write("tls.key", string(keyPEM))
	srv, err := New(Config{Kube: env.Kube, Kubevirt: kv, Handlers: &fakeAgentDialer{fakeAgent: &fakeAgent{}, url: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	serveCtx, stop := context.WithCancel(context.Background())
	stopped, err := srv.Serve(serveCtx, ServeOptions{BindAddress: "127.0.0.1", Port: port, CertFile: certFile, KeyFile: keyFile,
		Kubeconfig: env.KubeconfigPath, AuthenticateWebhooks: true})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-stopped })

	// Posted straight to virt-api, as a tenant pod could.
	forged := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"policy","version":"v1","kind":"Eviction"},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"subResource":"eviction","name":"virt-launcher-victim-abcde","namespace":"victim","operation":"CREATE",` +
		`"userInfo":{"username":"system:admin"},"object":{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"virt-launcher-victim-abcde","namespace":"victim"}}}}`)
	if _, err := env.Kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "tenant", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 20 * time.Second} //nolint:gosec // self-signed
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"anonymous", "", http.StatusUnauthorized}, {"a tenant's service account", tr.Status.Token, http.StatusForbidden}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d%s", port, PodEvictionPath), bytes.NewReader(forged))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a forged eviction review from %s: %s %q, want %d", tc.who, resp.Status, body, tc.want)
		}
	}

	// kube-apiserver calls the VMI validator through an ExternalName
	// Service pointing at virt-api on loopback.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-api", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt(port)}}},
	}
	if _, err := env.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	registerVMIValidator(ctx, t, env, port, certPEM)
	good := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: "default"}, Spec: runnableSpec()}
	create := func(vmi *v1.VirtualMachineInstance) error {
		_, err := kv.KubevirtV1().VirtualMachineInstances("default").Create(ctx, vmi, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// kube-apiserver's user may not post to the path yet: virt-api refuses
	// it, and failurePolicy Fail refuses the VMI.
	waitUntil(t, 30*time.Second, "kube-apiserver's call refused by virt-api", func() (bool, string) {
		err := create(good)
		return err != nil && strings.Contains(err.Error(), `forbidden: User "`+webhookCaller+`" cannot post path "`+ValidateVMIPath+`"`), fmt.Sprint(err)
	})

	// The ClusterRole an installation gives kube-apiserver's webhook user.
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt.io:admission-webhook-caller"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: WebhookPaths(), Verbs: []string{"post"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt.io:admission-webhook-caller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubevirt.io:admission-webhook-caller"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: webhookCaller}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// virt-api caches a denial for 10 s.
	waitUntil(t, 45*time.Second, "a runnable VMI admitted through the authenticated webhook", func() (bool, string) {
		err := create(good)
		return err == nil, fmt.Sprint(err)
	})
	bad := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: runnableSpec()}
	bad.Spec.Domain.Devices.Disks[0].Disk.Bus = "floppy"
	if err := create(bad); err == nil || !strings.Contains(err.Error(), "spec.domain.devices.disks[0].disk.bus") {
		t.Errorf("creating a VMI with an unknown disk bus: %v, want the webhook's refusal naming spec.domain.devices.disks[0].disk.bus", err)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (last: %s)", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
