package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"
)

func TestIssueChainsAndRoundTrips(t *testing.T) {
	now := time.Now()
	ca, caKey, err := Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, key, err := Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}, DNSNames: []string{"leaf"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.SerialNumber.Cmp(ca.SerialNumber) == 0 {
		t.Error("two certificates share a serial number")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "leaf"}); err != nil {
		t.Errorf("the leaf does not chain to its CA: %v", err)
	}
	if _, err := tls.X509KeyPair(CertPEM(leaf), KeyPEM(key)); err != nil {
		t.Errorf("PEM pair does not load: %v", err)
	}
	if cert, signer, err := ParsePair(CertPEM(leaf), KeyPEM(key)); err != nil || !cert.Equal(leaf) || !key.PublicKey.Equal(signer.Public()) {
		t.Errorf("ParsePair: %v, %v", cert, err)
	}
	if _, _, err := ParsePair(CertPEM(ca), KeyPEM(key)); err == nil {
		t.Error("ParsePair took a key that is not the certificate's")
	}
}
