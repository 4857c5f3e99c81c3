package installstrategy

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func TestEnsureCertificates(t *testing.T) {
	ctx := t.Context()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := dynamicfake.NewSimpleDynamicClient(scheme)
	writes, err := EnsureCertificates(ctx, c, "kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	if writes != 4 { // CA Secret, bundle ConfigMap, server and client Secrets
		t.Errorf("first call wrote %d objects, want 4", writes)
	}
	if writes, err = EnsureCertificates(ctx, c, "kubevirt"); err != nil || writes != 0 {
		t.Errorf("second call wrote %d objects (err %v), want 0", writes, err)
	}
	if err := c.Resource(secretsGVR).Namespace("kubevirt").Delete(ctx, HandlerServerCertSecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if writes, err = EnsureCertificates(ctx, c, "kubevirt"); err != nil || writes != 1 {
		t.Errorf("after deleting the server certificate: wrote %d objects (err %v), want 1", writes, err)
	}

	// A client with the client certificate and the bundle talks to a
	// server with the server certificate that requires client certificates
	// from the same CA: what virt-handler's REST API does.
	secret := func(name string) map[string][]byte {
		u, err := c.Resource(secretsGVR).Namespace("kubevirt").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	cm, err := c.Resource(configMapsGVR).Namespace("kubevirt").Get(ctx, CABundleConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle := cm.Object["data"].(map[string]any)[CABundleKey].(string)
	clientTLS, err := HandlerClientTLS(secret(HandlerClientCertSecretName), bundle)
	if err != nil {
		t.Fatal(err)
	}
	serverData := secret(HandlerServerCertSecretName)
	serverCert, err := tls.X509KeyPair(serverData[corev1.TLSCertKey], serverData[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientTLS.RootCAs}
	a, b := net.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- tls.Server(a, serverTLS).HandshakeContext(context.Background()) }()
	if err := tls.Client(b, clientTLS).HandshakeContext(ctx); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}

	if err := DeleteCertificates(ctx, c, "kubevirt"); err != nil {
		t.Fatal(err)
	}
	list, err := c.Resource(secretsGVR).Namespace("kubevirt").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after DeleteCertificates: %d Secrets left (err %v)", len(list.Items), err)
	}
}
