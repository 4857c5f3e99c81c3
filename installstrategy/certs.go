package installstrategy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/vmkit/vmkit/internal/pki"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Certificates of an installation, with KubeVirt's names. The operator
// creates them (EnsureCertificates) before it applies a strategy: they are
// random, so they cannot be part of a strategy, which is pure.
const (
	// CASecretName holds the installation's CA (tls.crt, tls.key).
	CASecretName = "kubevirt-ca"
	// ExportCASecretName holds the CA (tls.crt, tls.key) with which
	// virt-controller signs the VirtualMachineExport servers' certificates
	// (KubeVirt's kubevirt-export-ca). It is a CA of its own: virt-controller
	// reads its key, and must not be able to mint certificates that
	// virt-api's and virt-handler's clients trust.
	ExportCASecretName = "kubevirt-export-ca"
	// CABundleConfigMapName holds the CA certificate (ca-bundle) for
	// whoever verifies the components' certificates.
	CABundleConfigMapName = "kubevirt-ca"
	// CABundleKey is the CA certificate's key in CABundleConfigMapName.
	CABundleKey = "ca-bundle"
	// HandlerServerCertSecretName is virt-handler's serving certificate
	// (tls.crt, tls.key) for its console, VNC and lifecycle REST API.
	HandlerServerCertSecretName = "kubevirt-virt-handler-server-certs"
	// HandlerClientCertSecretName is the client certificate virt-handler's
	// REST API accepts (tls.crt, tls.key): what virt-api, or vmctl run by
	// a cluster admin who may read it, presents.
	HandlerClientCertSecretName = "kubevirt-virt-handler-certs"
	// HandlerServerName is the DNS name in virt-handler's serving
	// certificate; clients reach a node's handler by its address and
	// verify the certificate against this name.
	HandlerServerName = "virt-handler"
	// HandlerClientCommonName is the subject common name of the client
	// certificate (HandlerClientCertSecretName), KubeVirt's: virt-handler
	// accepts client certificates of the CA bundle with this name only.
	HandlerClientCommonName = "kubevirt.io:system:client:virt-handler"
	// MigrationClientCertSecretName is the client certificate (tls.crt,
	// tls.key) a node agent's migration proxy presents to another node's
	// migration listeners: the only identity they accept, and one the
	// REST API refuses (a connection a launcher's libvirt opens through
	// the proxy carries it, so it must open nothing but migrations).
	MigrationClientCertSecretName = "kubevirt-virt-handler-migration-certs"
	// MigrationClientCommonName is the subject common name of
	// MigrationClientCertSecretName's certificate.
	MigrationClientCommonName = "kubevirt.io:system:client:migration-proxy"
	// APIServerCertSecretName is virt-api's serving certificate (tls.crt,
	// tls.key), for the names of its Service (virt-api, virt-api.<ns>,
	// virt-api.<ns>.svc): the aggregator verifies it against the CA bundle
	// of the APIService (see ApplyOptions.CABundle).
	APIServerCertSecretName = "kubevirt-virt-api-certs"
)

const (
	caValidity   = 5 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: a certificate closer than this to its end is re-issued.
	renewBefore = 30 * 24 * time.Hour
)

var (
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
)

// Certificates is what EnsureCertificates found or wrote.
type Certificates struct {
	// CABundle is the installation CA's certificate (PEM), as the
	// ConfigMap CABundleConfigMapName holds it: it verifies virt-api's and
	// virt-handler's serving certificates. The operator passes it to Apply
	// (ApplyOptions.CABundle), which puts it into the APIService.
	CABundle []byte
	// Writes is the number of objects created or updated.
	Writes int
}

// EnsureCertificates makes sure the installation's CA, its bundle,
// virt-api's serving certificate, virt-handler's server and client
// certificates and the export CA exist in namespace and are valid for at least 30 more days;
// it creates or re-issues only what is missing, unreadable, expiring, not
// signed by the CA or issued for other names (a re-issued CA re-issues
// everything), and returns the CA bundle and the number of objects it wrote.
func EnsureCertificates(ctx context.Context, c dynamic.Interface, namespace string) (Certificates, error) {
	now := time.Now()
	secrets := c.Resource(secretsGVR).Namespace(namespace)
	var out Certificates
	read := func(name string) (*corev1.Secret, error) {
		u, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		s := &corev1.Secret{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		return s, nil
	}
	write := func(existing *corev1.Secret, name string, certPEM, keyPEM []byte) error {
		s := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: certMeta(name, namespace),
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		if existing != nil {
			s.ResourceVersion = existing.ResourceVersion
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: u}
		if existing == nil {
			_, err = secrets.Create(ctx, obj, metav1.CreateOptions{})
		} else {
			_, err = secrets.Update(ctx, obj, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("writing Secret %s/%s: %w", namespace, name, err)
		}
		out.Writes++
		return nil
	}

	caSecret, err := read(CASecretName)
	if err != nil {
		return out, err
	}
	ca, caKey, ok := parsePair(caSecret, now)
	renewed := false
	if !ok {
		caCert, key, err := issueCA("kubevirt.io@"+namespace, now)
		if err != nil {
			return out, fmt.Errorf("CA: %w", err)
		}
		if err := write(caSecret, CASecretName, pki.CertPEM(caCert), pki.KeyPEM(key)); err != nil {
			return out, err
		}
		ca, caKey, renewed = caCert, key, true
	}
	bundle, n, err := ensureBundle(ctx, c.Resource(configMapsGVR).Namespace(namespace), namespace, ca, now)
	out.Writes += n
	if err != nil {
		return out, err
	}
	out.CABundle = bundle

	leaves := []struct {
		name  string
		tmpl  x509.Certificate
		usage x509.ExtKeyUsage
	}{
		{HandlerServerCertSecretName, x509.Certificate{
			Subject:  pkix.Name{CommonName: "kubevirt.io:system:node:virt-handler"},
			DNSNames: []string{HandlerServerName, HandlerServerName + "." + namespace + ".svc"},
		}, x509.ExtKeyUsageServerAuth},
		{HandlerClientCertSecretName, x509.Certificate{
			Subject: pkix.Name{CommonName: HandlerClientCommonName},
		}, x509.ExtKeyUsageClientAuth},
		{MigrationClientCertSecretName, x509.Certificate{
			Subject: pkix.Name{CommonName: MigrationClientCommonName},
		}, x509.ExtKeyUsageClientAuth},
		{APIServerCertSecretName, x509.Certificate{
			Subject:  pkix.Name{CommonName: APIServiceName + "." + namespace + ".svc"},
			DNSNames: []string{APIServiceName, APIServiceName + "." + namespace, APIServiceName + "." + namespace + ".svc"},
		}, x509.ExtKeyUsageServerAuth},
	}
	exportCA, err := read(ExportCASecretName)
	if err != nil {
		return out, err
	}
	if _, _, ok := parsePair(exportCA, now); !ok {
		cert, key, err := issueCA("export.kubevirt.io@"+namespace, now)
		if err != nil {
			return out, fmt.Errorf("export CA: %w", err)
		}
		if err := write(exportCA, ExportCASecretName, pki.CertPEM(cert), pki.KeyPEM(key)); err != nil {
			return out, err
		}
	}
	for _, l := range leaves {
		existing, err := read(l.name)
		if err != nil {
			return out, err
		}
		if cert, _, ok := parsePair(existing, now); ok && !renewed && cert.CheckSignatureFrom(ca) == nil &&
			slices.Equal(cert.DNSNames, l.tmpl.DNSNames) && slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{l.usage}) {
			continue
		}
		tmpl := l.tmpl
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(leafValidity)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{l.usage}
		cert, key, err := pki.Issue(&tmpl, ca, caKey)
		if err != nil {
			return out, fmt.Errorf("%s: %w", l.name, err)
		}
		if err := write(existing, l.name, pki.CertPEM(cert), pki.KeyPEM(key)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// issueCA makes a self-signed CA valid for caValidity.
func issueCA(commonName string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return pki.Issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
}

// DeleteCertificates removes what EnsureCertificates created.
func DeleteCertificates(ctx context.Context, c dynamic.Interface, namespace string) error {
	var errs []error
	for _, name := range []string{APIServerCertSecretName, MigrationClientCertSecretName, HandlerClientCertSecretName, HandlerServerCertSecretName, CASecretName, ExportCASecretName} {
		if err := c.Resource(secretsGVR).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Secret %s/%s: %w", namespace, name, err))
		}
	}
	if err := c.Resource(configMapsGVR).Namespace(namespace).Delete(ctx, CABundleConfigMapName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ConfigMap %s/%s: %w", namespace, CABundleConfigMapName, err))
	}
	return errors.Join(errs...)
}

// HandlerClientTLS returns the TLS configuration a client of virt-handler's
// REST API uses, from the client certificate Secret and the CA bundle
// ConfigMap's data (as EnsureCertificates wrote them).
func HandlerClientTLS(clientSecret map[string][]byte, caBundle string) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(clientSecret[corev1.TLSCertKey], clientSecret[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("client certificate Secret %s: %w", HandlerClientCertSecretName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caBundle)) {
		return nil, fmt.Errorf("CA bundle ConfigMap %s: no certificate in %s", CABundleConfigMapName, CABundleKey)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   HandlerServerName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ensureBundle makes the bundle ConfigMap hold the CA first, then every
// other CA certificate the bundle held that is still valid, as KubeVirt
// keeps CA certificates in its bundle as long as they are valid: after a
// CA rotation, certificates the old CA signed (a component that has not
// reloaded its files yet, a client holding the old client certificate)
// are still trusted until the old CA expires, while the components
// already trust the new one. It returns the bundle and the number of
// objects written.
func ensureBundle(ctx context.Context, cms dynamic.ResourceInterface, namespace string, ca *x509.Certificate, now time.Time) ([]byte, int, error) {
	live, err := cms.Get(ctx, CABundleConfigMapName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, 0, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, CABundleConfigMapName, err)
	}
	var old string
	if live != nil {
		old, _, _ = unstructured.NestedString(live.Object, "data", CABundleKey)
	}
	bundle := mergeBundle(ca, []byte(old), now)
	if live != nil && old == string(bundle) {
		return bundle, 0, nil
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: certMeta(CABundleConfigMapName, namespace),
		Data:       map[string]string{CABundleKey: string(bundle)},
	}
	if live != nil {
		cm.ResourceVersion = live.GetResourceVersion()
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		return nil, 0, err
	}
	if live == nil {
		_, err = cms.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	} else {
		_, err = cms.Update(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, 0, fmt.Errorf("writing ConfigMap %s/%s: %w", namespace, CABundleConfigMapName, err)
	}
	return bundle, 1, nil
}

// mergeBundle is ca followed by the CA certificates of old (PEM) that are
// valid at now and not ca, in their order; anything else in old (expired
// or non-CA certificates, other PEM blocks, garbage) is dropped.
func mergeBundle(ca *x509.Certificate, old []byte, now time.Time) []byte {
	out := pki.CertPEM(ca)
	for rest := old; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil || !c.IsCA || c.Equal(ca) || now.After(c.NotAfter) || bytes.Contains(out, pem.EncodeToMemory(block)) {
			continue
		}
		out = append(out, pki.CertPEM(c)...)
	}
	return out
}

func certMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    map[string]string{v1.ManagedByLabel: v1.ManagedByLabelOperatorValue},
	}
}

// parsePair reads a TLS Secret's certificate and key; ok is false when
// either is missing or unreadable or the certificate ends within renewBefore.
func parsePair(s *corev1.Secret, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool) {
	if s == nil {
		return nil, nil, false
	}
	cert, signer, err := pki.ParsePair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil || now.Add(renewBefore).After(cert.NotAfter) {
		return nil, nil, false
	}
	key, ok := signer.(*ecdsa.PrivateKey)
	return cert, key, ok
}
