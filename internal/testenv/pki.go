package testenv

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	x509pki "github.com/vmkit/vmkit/internal/pki"
)

// pki holds the files kube-apiserver and its clients need: a CA, a serving
// certificate for 127.0.0.1/localhost, an admin client certificate and token,
// the service account signing key, and for API aggregation a front proxy CA
// and the proxy client certificate it signed.
type pki struct {
	caCertFile, caKeyFile             string
	servingCertFile, servingKeyFile   string
	saPrivateKeyFile, saPublicKeyFile string
	tokenFile                         string
	// frontProxyCAFile verifies proxyClientCertFile, the certificate
	// kube-apiserver presents to aggregated API servers (a CA of its own,
	// so that no client certificate of caCertFile can pass for the proxy).
	frontProxyCAFile                        string
	proxyClientCertFile, proxyClientKeyFile string

	caCertPEM                 []byte
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
	adminCertPEM, adminKeyPEM []byte
	// kubeletClientCertFile and kubeletClientKeyFile are kube-apiserver's
	// client certificate towards kubelets (logs, exec).
	kubeletClientCertFile, kubeletClientKeyFile string
	adminToken                                  string
}

func newPKI(dir, apiHost string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	now := time.Now()
	p := &pki{
		caCertFile:       filepath.Join(dir, "ca.crt"),
		caKeyFile:        filepath.Join(dir, "ca.key"),
		servingCertFile:  filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:   filepath.Join(dir, "apiserver.key"),
		saPrivateKeyFile: filepath.Join(dir, "sa.key"),
		saPublicKeyFile:  filepath.Join(dir, "sa.pub"),
		tokenFile:        filepath.Join(dir, "tokens.csv"),

		frontProxyCAFile:    filepath.Join(dir, "front-proxy-ca.crt"),
		proxyClientCertFile: filepath.Join(dir, "front-proxy-client.crt"),
		proxyClientKeyFile:  filepath.Join(dir, "front-proxy-client.key"),
	}

	ca, caKey, err := x509pki.Issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "vmkit-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	serving, servingKey, err := x509pki.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(apiHost), net.ParseIP(serviceClusterIP)},
	}, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	p.ca, p.caKey = ca, caKey
	if p.adminCertPEM, p.adminKeyPEM, err = p.clientCert(pkix.Name{CommonName: adminUser, Organization: []string{mastersGroup}}); err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	frontProxyCA, frontProxyKey, err := x509pki.Issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "vmkit-testenv-front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("front proxy CA: %w", err)
	}
	proxyClient, proxyClientKey, err := x509pki.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, frontProxyCA, frontProxyKey)
	if err != nil {
		return nil, fmt.Errorf("front proxy client certificate: %w", err)
	}
	// Service account tokens are RS256-signed, as in most clusters.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service account public key: %w", err)
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}

	p.caCertPEM = x509pki.CertPEM(ca)
	p.adminToken = hex.EncodeToString(token)
	caKeyPEM, servingKeyPEM, proxyClientKeyPEM := x509pki.KeyPEM(caKey), x509pki.KeyPEM(servingKey), x509pki.KeyPEM(proxyClientKey)
	files := []struct {
		path string
		data []byte
	}{
		{p.caCertFile, p.caCertPEM},
		{p.caKeyFile, caKeyPEM},
		{p.servingCertFile, x509pki.CertPEM(serving)},
		{p.servingKeyFile, servingKeyPEM},
		{filepath.Join(dir, "admin.crt"), p.adminCertPEM},
		{filepath.Join(dir, "admin.key"), p.adminKeyPEM},
		{p.saPrivateKeyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})},
		{p.saPublicKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})},
		// token,user,uid,groups
		{p.tokenFile, []byte(fmt.Sprintf("%s,%s,%s,%s\n", p.adminToken, adminUser, adminUser, mastersGroup))},
		{p.frontProxyCAFile, x509pki.CertPEM(frontProxyCA)},
		{p.proxyClientCertFile, x509pki.CertPEM(proxyClient)},
		{p.proxyClientKeyFile, proxyClientKeyPEM},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return p, nil
}

// clientCert issues a client certificate for subject, valid for a year and
// signed by the CA, and returns it and its key as PEM.
func (p *pki) clientCert(subject pkix.Name) (certPEMData, keyPEMData []byte, err error) {
	now := time.Now()
	cert, key, err := x509pki.Issue(&x509.Certificate{
		Subject:     subject,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	return x509pki.CertPEM(cert), x509pki.KeyPEM(key), nil
}
