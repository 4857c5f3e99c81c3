package virtapi

import (
	"testing"

	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
)

// TestWebhooksUseTheirOwnClients: the admission webhooks (eviction, the VM
// validator's expansion) read and write with Config.WebhookKube and
// WebhookKubevirt, whose rate limiter the subresources do not share, and
// with Kube and Kubevirt when those are not set.
func TestWebhooksUseTheirOwnClients(t *testing.T) {
	kube, kv := kubefake.NewClientset(), fake.NewSimpleClientset()
	hookKube, hookKV := kubefake.NewClientset(), fake.NewSimpleClientset()
	handlers := &HandlerPods{}

	s, err := New(Config{Kube: kube, Kubevirt: kv, Handlers: handlers, WebhookKube: hookKube, WebhookKubevirt: hookKV})
	if err != nil {
		t.Fatal(err)
	}
	hooks := s.webhooks()
	if hooks.cfg.Kube != hookKube || hooks.cfg.Kubevirt != hookKV {
		t.Error("the webhooks use the subresources' clients")
	}
	if s.cfg.Kube != kube || s.cfg.Kubevirt != kv {
		t.Error("the subresources use the webhooks' clients")
	}

	s, err = New(Config{Kube: kube, Kubevirt: kv, Handlers: handlers})
	if err != nil {
		t.Fatal(err)
	}
	if hooks := s.webhooks(); hooks.cfg.Kube != kube || hooks.cfg.Kubevirt != kv {
		t.Error("without webhook clients the webhooks do not use Kube and Kubevirt")
	}
}
