package export

import (
	"context"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/pki"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// Issuer signs the export servers' serving certificates.
type Issuer interface {
	// Issue returns a PEM certificate and key for dnsNames and 127.0.0.1,
	// valid until notAfter.
	Issue(ctx context.Context, dnsNames []string, notAfter time.Time) (certPEM, keyPEM []byte, err error)
	// CABundle returns the PEM CA certificate that verifies them: the
	// status links' cert.
	CABundle(ctx context.Context) (string, error)
}

// SecretIssuer is an Issuer whose CA pair is a kubernetes.io/tls Secret
// (tls.crt, tls.key): the operator's kubevirt-export-ca, a CA of its own so
// the controller never holds the key that virt-api's and virt-handler's
// certificates chain to.
type SecretIssuer struct {
	// Secrets reads the Secret (in the install namespace).
	Secrets kubeclient.SecretInterface
	// Name of the Secret.
	Name string
}

func (s SecretIssuer) read(ctx context.Context) (*x509.Certificate, crypto.Signer, []byte, error) {
	secret, err := s.Secrets.Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the export CA Secret %s: %w", s.Name, err)
	}
	certPEM := secret.Data[corev1.TLSCertKey]
	cert, key, err := pki.ParsePair(certPEM, secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the export CA Secret %s (%s, %s): %w", s.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
	}
	return cert, key, certPEM, nil
}

// Issue signs a serving certificate with the CA.
func (s SecretIssuer) Issue(ctx context.Context, dnsNames []string, notAfter time.Time) ([]byte, []byte, error) {
	ca, caKey, _, err := s.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	cert, key, err := pki.Issue(&x509.Certificate{
		Subject:  pkix.Name{CommonName: dnsNames[0]},
		DNSNames: dnsNames,
		// A client reaching the server through a port-forward (kubectl
		// port-forward, then curl --cacert with the link's cert) connects
		// to 127.0.0.1: KubeVirt's certificates fail that check. (KubeVirt's
		// virtctl skips verification with --port-forward.)
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-5 * time.Minute),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing the export server's certificate: %w", err)
	}
	return pki.CertPEM(cert), pki.KeyPEM(key), nil
}

// CABundle returns the CA certificate.
func (s SecretIssuer) CABundle(ctx context.Context) (string, error) {
	_, _, certPEM, err := s.read(ctx)
	return string(certPEM), err
}
