package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/internal/testenv"
)

// TestClientRateLimit: the operator's client, built from its default flags,
// makes an install's burst of requests without waiting on a rate limit.
// With client-go's default (5 per second after a burst of 10) the 100
// requests here take 18 s; an install's few hundred took 20-40 s that way.
func TestClientRateLimit(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if got := r.Header.Get("User-Agent"); got != "vmkit-virt-operator" {
			t.Errorf("User-Agent %q, want vmkit-virt-operator", got)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kubevirt"}}`)
	}))
	defer srv.Close()
	kubeconfig := testenv.Kubeconfig(t, srv.URL)

	o := parse(t, "--kubeconfig", kubeconfig)
	cfg, err := o.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 100 || cfg.Burst != 200 {
		t.Errorf("client QPS %v, burst %d; want 100 and 200 by default", cfg.QPS, cfg.Burst)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	began := time.Now()
	for range n {
		if _, err := kube.CoreV1().Namespaces().Get(t.Context(), "kubevirt", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("%d requests took %v: the client waits on its rate limit", n, took)
	}
	if got := requests.Load(); got != n {
		t.Errorf("server saw %d requests, want %d", got, n)
	}

	o = parse(t, "--kubeconfig", kubeconfig, "--qps", "7", "--burst", "9")
	if cfg, err = o.restConfig(); err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 7 || cfg.Burst != 9 {
		t.Errorf("--qps 7 --burst 9: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
}
