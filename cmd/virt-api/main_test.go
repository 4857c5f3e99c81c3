package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/internal/testenv"
)

func parse(t *testing.T, args ...string) options {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("virt-api", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// fakeAPIServer answers every request with a Namespace and records the
// user agents it saw.
func fakeAPIServer(t *testing.T) (kubeconfig string, agents func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("User-Agent")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kubevirt"}}`)
	}))
	t.Cleanup(srv.Close)
	kubeconfig = testenv.Kubeconfig(t, srv.URL)
	return kubeconfig, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// TestClientRateLimit: virt-api's clients, built from its default flags,
// make a burst of requests without waiting on a rate limit. With
// client-go's default (5 per second after a burst of 10), which every
// subresource and webhook call shared, the 100 requests here take 18 s
// (#35 N5: a flood of webhook calls starved consoles, starts and stops).
func TestClientRateLimit(t *testing.T) {
	kubeconfig, agents := fakeAPIServer(t)
	o := parse(t, "--kubeconfig", kubeconfig)
	cfg, err := o.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 100 || cfg.Burst != 200 {
		t.Errorf("subresources' client: QPS %v, burst %d; want 100 and 200 by default", cfg.QPS, cfg.Burst)
	}
	hooks := o.webhookConfig(cfg)
	if hooks.QPS != 200 || hooks.Burst != 400 {
		t.Errorf("webhooks' client: QPS %v, burst %d; want 200 and 400 by default (KubeVirt's)", hooks.QPS, hooks.Burst)
	}
	kube, _, err := clients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hookKube, _, err := clients(hooks)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 100 {
		if _, err := kube.CoreV1().Namespaces().Get(t.Context(), "kubevirt", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hookKube.CoreV1().Namespaces().Get(t.Context(), "kubevirt", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("101 requests took %v: the client waits on its rate limit", d)
	}
	if got := agents(); got["vmkit-virt-api"] != 100 || got["vmkit-virt-api-webhooks"] != 1 {
		t.Errorf("requests by user agent %v, want 100 of vmkit-virt-api and 1 of vmkit-virt-api-webhooks", got)
	}
}

// TestWebhookClientHasItsOwnRateLimit: the webhooks' client waiting on its
// exhausted rate limit does not hold up the subresources' client.
func TestWebhookClientHasItsOwnRateLimit(t *testing.T) {
	kubeconfig, _ := fakeAPIServer(t)
	o := parse(t, "--kubeconfig", kubeconfig, "--qps=1", "--burst=1", "--webhook-qps=1", "--webhook-burst=1")
	cfg, err := o.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	kube, _, err := clients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hookKube, _, err := clients(o.webhookConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	get := func(c kubernetes.Interface) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := c.CoreV1().Namespaces().Get(t.Context(), "kubevirt", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	get(hookKube) // the webhooks' burst of 1 is spent
	if d := get(kube); d > 500*time.Millisecond {
		t.Errorf("the subresources' first request took %v after the webhooks' client spent its burst: they share a rate limiter", d)
	}
	if d := get(hookKube); d < 500*time.Millisecond {
		t.Errorf("the webhooks' second request took %v at 1 per second: no rate limit", d)
	}
}
