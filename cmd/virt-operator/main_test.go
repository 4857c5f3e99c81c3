package main

import (
	"context"
	"crypto/tls"
	"flag"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func parse(t *testing.T, args ...string) options {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("virt-operator", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDumpInstallStrategy runs virt-operator --dump-install-strategy
// against a real API server: the ConfigMap it writes reads back as exactly
// the strategy Generate returns for the environment's config.
func TestDumpInstallStrategy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vmkit"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		installstrategy.EnvOperatorImage:          "registry.example.com/vmkit/virt-operator:v1.4.0",
		installstrategy.EnvTargetInstallNamespace: "vmkit",
		installstrategy.EnvTargetImagePullPolicy:  "Always",
	}
	getenv := func(k string) string { return vars[k] }
	o := parse(t, "--dump-install-strategy", "--kubeconfig", env.KubeconfigPath)
	for range 2 { // a second dump replaces the first
		if err := run(ctx, o, getenv, nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := installstrategy.ConfigFromEnv(getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := installstrategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := env.Kube.CoreV1().ConfigMaps("vmkit").Get(ctx, installstrategy.ConfigMapName(cfg.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Annotations[v1.InstallStrategyVersionAnnotation] != "v1.4.0" || cm.Annotations[v1.InstallStrategyRegistryAnnotation] != "registry.example.com/vmkit" {
		t.Errorf("annotations %v", cm.Annotations)
	}
	got, err := installstrategy.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Error("the dumped strategy differs from Generate's")
	}
}

// TestRunInstalls runs the whole command (no leader election) and checks
// that a KubeVirt CR gets installed, and that its /metrics answers the
// admin over HTTPS but not an anonymous request, while its probes' paths
// need no credentials.
func TestRunInstalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: all})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{installstrategy.EnvOperatorImage: "quay.io/kubevirt/virt-operator:v1.4.0"}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	metricsAddress := freeAddress(t)
	go func() {
		done <- run(runCtx, parse(t, "--kubeconfig", env.KubeconfigPath, "--leader-elect=true", "--metrics-address="+metricsAddress), func(k string) string { return vars[k] }, nil)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := env.Kube.AppsV1().DaemonSets("kubevirt").Get(ctx, "virt-handler", metav1.GetOptions{})
		if err != nil {
			// Create the CR once the operator is up (it may still be electing).
			return false, ensureKubeVirt(ctx, env)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("virt-handler never installed: %v", err)
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second} //nolint:gosec // self-signed
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", env.AdminToken, http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metricsAddress+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
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
			t.Errorf("GET %s (token %v): %s %q, want %d", tc.path, tc.token != "", resp.Status, body, tc.want)
		}
		if tc.path == "/metrics" && tc.want == http.StatusOK && !strings.Contains(string(body), "kubevirt_virt_operator_leading_status 1") {
			t.Errorf("GET /metrics as the admin lacks kubevirt_virt_operator_leading_status 1")
		}
	}
}

// freeAddress is a local address nothing listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func ensureKubeVirt(ctx context.Context, env *testenv.Env) error {
	body := []byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt","namespace":"kubevirt"},"spec":{}}`)
	res := env.Kube.CoreV1().RESTClient().Post().AbsPath("/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts").Body(body).Do(ctx)
	if err := res.Error(); err != nil && !isAlreadyExists(err) {
		return err
	}
	return nil
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
