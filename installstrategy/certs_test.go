package installstrategy

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/vmkit/vmkit/internal/pki"
)

func TestEnsureCertificates(t *testing.T) {
	ctx := t.Context()
	c := fakeDynamic(t)
	certs, err := EnsureCertificates(ctx, c, "kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	if certs.Writes != 7 { // CA Secret, bundle ConfigMap, handler server and client, migration client, virt-api, export CA Secrets
		t.Errorf("first call wrote %d objects, want 7", certs.Writes)
	}
	again, err := EnsureCertificates(ctx, c, "kubevirt")
	if err != nil || again.Writes != 0 {
		t.Errorf("second call wrote %d objects (err %v), want 0", again.Writes, err)
	}
	if string(again.CABundle) != string(certs.CABundle) {
		t.Error("second call returned another CA bundle")
	}
	if err := c.Resource(secretsGVR).Namespace("kubevirt").Delete(ctx, HandlerServerCertSecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if again, err = EnsureCertificates(ctx, c, "kubevirt"); err != nil || again.Writes != 1 {
		t.Errorf("after deleting the server certificate: wrote %d objects (err %v), want 1", again.Writes, err)
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
	if bundle != string(certs.CABundle) {
		t.Errorf("EnsureCertificates returned CA bundle\n%s\nthe ConfigMap holds\n%s", certs.CABundle, bundle)
	}
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

	// The migration proxy's certificate has a name of its own: the REST
	// API (which accepts only HandlerClientCommonName) refuses it.
	mig, err := tls.X509KeyPair(secret(MigrationClientCertSecretName)[corev1.TLSCertKey], secret(MigrationClientCertSecretName)[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(mig.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != MigrationClientCommonName {
		t.Errorf("%s: common name %q, want %q", MigrationClientCertSecretName, leaf.Subject.CommonName, MigrationClientCommonName)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: clientTLS.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("%s: not a client certificate of the installation's CA: %v", MigrationClientCertSecretName, err)
	}

	// The export CA is a CA of its own: what it signs, the installation's
	// clients do not trust.
	exportPair, err := tls.X509KeyPair(secret(ExportCASecretName)[corev1.TLSCertKey], secret(ExportCASecretName)[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	exportCA, err := x509.ParseCertificate(exportPair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exportCA.Verify(x509.VerifyOptions{Roots: clientTLS.RootCAs}); err == nil || !exportCA.IsCA {
		t.Errorf("the export CA (CA %v) chains to the installation's CA", exportCA.IsCA)
	}

	if err := DeleteCertificates(ctx, c, "kubevirt"); err != nil {
		t.Fatal(err)
	}
	list, err := c.Resource(secretsGVR).Namespace("kubevirt").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after DeleteCertificates: %d Secrets left (err %v)", len(list.Items), err)
	}
}

// TestAPIServerCertificate: virt-api's serving certificate is issued for
// its Service's names and verifies against the CA bundle (as the
// aggregator verifies it with the APIService's caBundle); it is re-issued
// as the handler's are: when missing, unreadable, expiring, issued for
// other names or uses or by another CA, and whenever the CA is re-issued.
func TestAPIServerCertificate(t *testing.T) {
	ctx := t.Context()
	const ns = "vmkit-system"
	c := fakeDynamic(t)
	certs, err := EnsureCertificates(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	// verify checks the Secret against bundle and returns its certificate.
	verify := func(t *testing.T, bundle []byte) *x509.Certificate {
		t.Helper()
		data := secretData(t, c, ns, APIServerCertSecretName)
		if _, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
			t.Fatalf("%s: %v", APIServerCertSecretName, err)
		}
		cert := parseCert(t, data[corev1.TLSCertKey])
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(bundle) {
			t.Fatal("no certificate in the CA bundle")
		}
		for _, name := range []string{"virt-api", "virt-api." + ns, "virt-api." + ns + ".svc"} {
			opts := x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("%s for %s: %v", APIServerCertSecretName, name, err)
			}
		}
		return cert
	}
	verify(t, certs.CABundle)

	caData := secretData(t, c, ns, CASecretName)
	caPair, err := tls.X509KeyPair(caData[corev1.TLSCertKey], caData[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	ca, caKey := parseCert(t, caData[corev1.TLSCertKey]), caPair.PrivateKey.(*ecdsa.PrivateKey)
	otherCA, otherKey, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "other"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour * 24 * 365),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := func() *x509.Certificate {
		return &x509.Certificate{
			NotBefore:   time.Now().Add(-time.Hour),
			NotAfter:    time.Now().Add(leafValidity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{"virt-api", "virt-api." + ns, "virt-api." + ns + ".svc"},
		}
	}
	tests := []struct {
		name   string
		tmpl   func() *x509.Certificate
		signer *x509.Certificate
		key    *ecdsa.PrivateKey
	}{
		{"expiring in 10 days", func() *x509.Certificate {
			tmpl := good()
			tmpl.NotAfter = time.Now().Add(10 * 24 * time.Hour)
			return tmpl
		}, ca, caKey},
		{"issued for another namespace", func() *x509.Certificate {
			tmpl := good()
			tmpl.DNSNames = []string{"virt-api", "virt-api.kubevirt", "virt-api.kubevirt.svc"}
			return tmpl
		}, ca, caKey},
		{"a client certificate", func() *x509.Certificate {
			tmpl := good()
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
			return tmpl
		}, ca, caKey},
		{"signed by another CA", good, otherCA, otherKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planted, key, err := pki.Issue(tt.tmpl(), tt.signer, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			putSecret(t, c, ns, APIServerCertSecretName, pki.CertPEM(planted), pki.KeyPEM(key))
			got, err := EnsureCertificates(ctx, c, ns)
			if err != nil || got.Writes != 1 {
				t.Errorf("wrote %d objects (err %v), want 1: the virt-api certificate", got.Writes, err)
			}
			if cert := verify(t, got.CABundle); cert.SerialNumber.Cmp(planted.SerialNumber) == 0 {
				t.Error("the certificate was kept")
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		putSecret(t, c, ns, APIServerCertSecretName, []byte("not a certificate"), []byte("not a key"))
		got, err := EnsureCertificates(ctx, c, ns)
		if err != nil || got.Writes != 1 {
			t.Errorf("wrote %d objects (err %v), want 1: the virt-api certificate", got.Writes, err)
		}
		verify(t, got.CABundle)
	})

	t.Run("CA re-issued", func(t *testing.T) {
		before := verify(t, certs.CABundle)
		expiring, key, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kubevirt.io@" + ns}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		putSecret(t, c, ns, CASecretName, pki.CertPEM(expiring), pki.KeyPEM(key))
		got, err := EnsureCertificates(ctx, c, ns)
		if err != nil || got.Writes != 6 { // CA, bundle and the four leaves
			t.Errorf("wrote %d objects (err %v), want 6", got.Writes, err)
		}
		if string(got.CABundle) == string(certs.CABundle) || string(got.CABundle) == string(pki.CertPEM(expiring)) {
			t.Fatal("the CA bundle did not change to a new CA")
		}
		after := verify(t, got.CABundle)
		if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
			t.Error("the virt-api certificate was not re-issued with the CA")
		}
		old := x509.NewCertPool()
		old.AppendCertsFromPEM(certs.CABundle)
		if _, err := after.Verify(x509.VerifyOptions{DNSName: "virt-api." + ns + ".svc", Roots: old}); err == nil {
			t.Error("the re-issued virt-api certificate still verifies against the old CA")
		}
	})

	if err := DeleteCertificates(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resource(secretsGVR).Namespace(ns).Get(ctx, APIServerCertSecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after DeleteCertificates, Get(%s) = %v, want NotFound", APIServerCertSecretName, err)
	}
}

func fakeDynamic(t *testing.T) *dynamicfake.FakeDynamicClient {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return dynamicfake.NewSimpleDynamicClient(scheme)
}

func secretData(t *testing.T, c dynamic.Interface, namespace, name string) map[string][]byte {
	t.Helper()
	u, err := c.Resource(secretsGVR).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// putSecret overwrites a TLS Secret's certificate and key.
func putSecret(t *testing.T, c dynamic.Interface, namespace, name string, certPEM, keyPEM []byte) {
	t.Helper()
	secrets := c.Resource(secretsGVR).Namespace(namespace)
	u, err := secrets.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		corev1.TLSCertKey:       base64.StdEncoding.EncodeToString(certPEM),
		corev1.TLSPrivateKeyKey: base64.StdEncoding.EncodeToString(keyPEM),
	}
	if err := unstructured.SetNestedMap(u.Object, data, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestCARotationKeepsOldCA: when the CA is re-issued (here: it ends within
// 30 days), the bundle holds the new CA first and keeps the old one while
// it is valid, so certificates the old CA signed still verify during the
// overlap; expired CAs and anything else in the bundle are dropped, and
// every leaf is re-issued by the new CA.
func TestCARotationKeepsOldCA(t *testing.T) {
	ctx := t.Context()
	const ns = "kubevirt"
	c := fakeDynamic(t)
	if _, err := EnsureCertificates(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := func(cn string, notAfter time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-48 * time.Hour), NotAfter: notAfter,
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
	}
	oldCA, oldKey, err := pki.Issue(caTmpl("old", now.Add(10*24*time.Hour)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	expiredCA, _, err := pki.Issue(caTmpl("expired", now.Add(-time.Hour)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	putSecret(t, c, ns, CASecretName, pki.CertPEM(oldCA), pki.KeyPEM(oldKey))
	cms := c.Resource(configMapsGVR).Namespace(ns)
	cm, err := cms.Get(ctx, CABundleConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := string(pki.CertPEM(oldCA)) + string(pki.CertPEM(expiredCA)) + "not PEM\n" + string(pki.KeyPEM(oldKey))
	if err := unstructured.SetNestedField(cm.Object, stale, "data", CABundleKey); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A client certificate the old CA signed, held by a client that has
	// not re-read its Secret yet.
	oldClient, _, err := pki.Issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: HandlerClientCommonName}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, oldCA, oldKey)
	if err != nil {
		t.Fatal(err)
	}

	certs, err := EnsureCertificates(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if certs.Writes != 6 {
		t.Errorf("rotation wrote %d objects, want 6 (CA, bundle, four leaves)", certs.Writes)
	}
	newCA := parseCert(t, secretData(t, c, ns, CASecretName)[corev1.TLSCertKey])
	var got []string
	for rest := certs.CABundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("bundle block %s: %v", b.Type, err)
		}
		got = append(got, cert.Subject.CommonName)
	}
	if want := []string{newCA.Subject.CommonName, "old"}; !slices.Equal(got, want) {
		t.Errorf("bundle after rotation holds %q, want %q (new CA first, the old one kept, the expired one and the rest dropped)", got, want)
	}
	cm, err = cms.Get(ctx, CABundleConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(cm.Object, "data", CABundleKey); s != string(certs.CABundle) {
		t.Error("the ConfigMap does not hold the returned bundle")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CABundle)
	for _, name := range []string{HandlerServerCertSecretName, HandlerClientCertSecretName, APIServerCertSecretName} {
		leaf := parseCert(t, secretData(t, c, ns, name)[corev1.TLSCertKey])
		if err := leaf.CheckSignatureFrom(newCA); err != nil {
			t.Errorf("%s is not signed by the new CA: %v", name, err)
		}
	}
	if _, err := oldClient.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a client certificate of the old CA does not verify against the bundle during the overlap: %v", err)
	}
	if again, err := EnsureCertificates(ctx, c, ns); err != nil || again.Writes != 0 || string(again.CABundle) != string(certs.CABundle) {
		t.Errorf("after rotation, the next call wrote %d objects (err %v) or changed the bundle", again.Writes, err)
	}

	// Once the old CA has expired it leaves the bundle.
	later := mergeBundle(newCA, certs.CABundle, oldCA.NotAfter.Add(time.Second))
	if string(later) != string(pki.CertPEM(newCA)) {
		t.Errorf("after the old CA expired the bundle is\n%s\nwant only the new CA", later)
	}
}
