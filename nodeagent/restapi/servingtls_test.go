package restapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmkit/vmkit/installstrategy"
)

type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func (c testCert) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})
}

func (c testCert) keyPEM(t *testing.T) []byte {
	der, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func (c testCert) pair(t *testing.T) tls.Certificate {
	p, err := tls.X509KeyPair(c.certPEM(), c.keyPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestCert issues a certificate from tmpl, signed by parent or
// self-signed when parent is nil.
func newTestCert(t *testing.T, tmpl *x509.Certificate, parent *testCert) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{cert, key}
}

func testCA(t *testing.T, name string) testCert {
	return newTestCert(t, &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil)
}

func testLeaf(t *testing.T, ca testCert, cn string, usage x509.ExtKeyUsage, dns ...string) testCert {
	return newTestCert(t, &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}, &ca)
}

// replaceFile swaps path's content by a rename, as the kubelet swaps a
// mounted Secret's files.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServingTLSReloadsAndChecksClientName: virt-handler's REST API
// accepts only client certificates of the CA bundle whose common name is
// KubeVirt's virt-handler client name; a rotated serving certificate and
// CA bundle are used without a restart, and during the overlap (both CAs
// in the bundle) clients holding certificates of either CA are accepted.
func TestServingTLSReloadsAndChecksClientName(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca-bundle")
	oldCA, newCA := testCA(t, "old CA"), testCA(t, "new CA")
	server := func(ca testCert) testCert {
		return testLeaf(t, ca, "kubevirt.io:system:node:virt-handler", x509.ExtKeyUsageServerAuth, installstrategy.HandlerServerName)
	}
	client := func(ca testCert, cn string) tls.Certificate {
		return testLeaf(t, ca, cn, x509.ExtKeyUsageClientAuth).pair(t)
	}
	oldServer := server(oldCA)
	replaceFile(t, certFile, oldServer.certPEM())
	replaceFile(t, keyFile, oldServer.keyPEM(t))
	replaceFile(t, caFile, oldCA.certPEM())

	addr := serveOK(t, ServingTLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientName: installstrategy.HandlerClientCommonName})

	roots := x509.NewCertPool()
	roots.AddCert(oldCA.cert)
	roots.AddCert(newCA.cert)
	// call returns the issuer of the serving certificate, or the error.
	call := func(cert tls.Certificate) (string, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: installstrategy.HandlerServerName, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		}}}
		resp, err := c.Get("https://" + addr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", errors.New(resp.Status)
		}
		return resp.TLS.PeerCertificates[0].Issuer.CommonName, nil
	}

	oldClient, newClient := client(oldCA, installstrategy.HandlerClientCommonName), client(newCA, installstrategy.HandlerClientCommonName)
	if issuer, err := call(oldClient); err != nil || issuer != "old CA" {
		t.Fatalf("client of the bundle's CA with the right name: issuer %q, %v; want old CA, no error", issuer, err)
	}
	for name, cert := range map[string]tls.Certificate{
		"a client certificate with another name (same CA)": client(oldCA, "kubevirt.io:system:client:someone-else"),
		"a client certificate of a CA not in the bundle":   newClient,
		"no client certificate":                            {},
	} {
		if _, err := call(cert); err == nil {
			t.Errorf("%s was accepted", name)
		} else if !strings.Contains(err.Error(), "tls: ") {
			t.Errorf("%s: %v, want a TLS handshake failure", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}

	// Rotation: the bundle first gets the new CA (the old one stays),
	// then the serving certificate is re-issued by the new CA.
	replaceFile(t, caFile, append(newCA.certPEM(), oldCA.certPEM()...))
	newServer := server(newCA)
	replaceFile(t, keyFile, newServer.keyPEM(t))
	replaceFile(t, certFile, newServer.certPEM())
	eventually(t, "the new serving certificate is served", func() bool {
		issuer, err := call(oldClient)
		return err == nil && issuer == "new CA"
	})
	if _, err := call(newClient); err != nil {
		t.Errorf("during the overlap a client certificate of the new CA is refused: %v", err)
	}
	if _, err := call(oldClient); err != nil {
		t.Errorf("during the overlap a client certificate of the old CA is refused: %v", err)
	}

	// The old CA leaves the bundle: its client certificates are refused.
	replaceFile(t, caFile, newCA.certPEM())
	eventually(t, "a client of the old CA is refused", func() bool {
		_, err := call(oldClient)
		return err != nil
	})
	if _, err := call(newClient); err != nil {
		t.Errorf("after the overlap a client certificate of the new CA is refused: %v", err)
	}
}

// TestClientTLSReloads: the migration proxy's client side follows its
// files (review N9): after the CA rotates and the client certificate is
// re-issued, a new connection succeeds without a restart; a server of a
// CA not in the bundle, or without the server name, is refused. The
// migration listeners accept only the migration proxy's name, and the REST
// API refuses it.
func TestClientTLSReloads(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := testCA(t, "old CA"), testCA(t, "new CA")
	// Two servers as a node agent runs them: the migration listener and
	// the REST API, each with its own CA file to rotate.
	serve := func(name, clientName string) (addr, caFile string) {
		sd := filepath.Join(dir, name)
		if err := os.Mkdir(sd, 0o755); err != nil {
			t.Fatal(err)
		}
		leaf := testLeaf(t, oldCA, "kubevirt.io:system:node:virt-handler", x509.ExtKeyUsageServerAuth, installstrategy.HandlerServerName)
		replaceFile(t, filepath.Join(sd, "tls.crt"), leaf.certPEM())
		replaceFile(t, filepath.Join(sd, "tls.key"), leaf.keyPEM(t))
		replaceFile(t, filepath.Join(sd, "ca"), append(oldCA.certPEM(), newCA.certPEM()...))
		return serveOK(t, ServingTLS{CertFile: filepath.Join(sd, "tls.crt"), KeyFile: filepath.Join(sd, "tls.key"), ClientCAFile: filepath.Join(sd, "ca"), ClientName: clientName}), filepath.Join(sd, "ca")
	}
	migrationAddr, _ := serve("migration", installstrategy.MigrationClientCommonName)
	restAddr, _ := serve("rest", installstrategy.HandlerClientCommonName)

	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca-bundle")
	client := testLeaf(t, oldCA, installstrategy.MigrationClientCommonName, x509.ExtKeyUsageClientAuth)
	replaceFile(t, certFile, client.certPEM())
	replaceFile(t, keyFile, client.keyPEM(t))
	replaceFile(t, caFile, newCA.certPEM()) // not yet the servers' CA
	cfg, err := ClientTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, ServerName: installstrategy.HandlerServerName}.Config(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	call := func(addr string) error {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg}}
		resp, err := c.Get("https://" + addr + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	if err := call(migrationAddr); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a server of a CA not in the bundle: %v, want refused", err)
	}
	// The bundle gains the servers' CA: the next connection succeeds.
	replaceFile(t, caFile, append(newCA.certPEM(), oldCA.certPEM()...))
	eventually(t, "the rotated CA bundle is used", func() bool { return call(migrationAddr) == nil })
	// The migration identity opens no REST API.
	if err := call(restAddr); err == nil {
		t.Error("virt-handler's REST API accepted the migration proxy's client certificate")
	}
	// The client certificate is re-issued by the new CA: it is presented
	// from the next connection on (the servers trust both CAs).
	renewed := testLeaf(t, newCA, installstrategy.MigrationClientCommonName, x509.ExtKeyUsageClientAuth)
	replaceFile(t, keyFile, renewed.keyPEM(t))
	replaceFile(t, certFile, renewed.certPEM())
	get := cfg.GetClientCertificate
	var presented string
	cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c, err := get(cri)
		if err == nil {
			leaf, _ := x509.ParseCertificate(c.Certificate[0])
			presented = leaf.Issuer.CommonName
		}
		return c, err
	}
	eventually(t, "the renewed client certificate is presented", func() bool { return call(migrationAddr) == nil && presented == "new CA" })
}

// serveOK serves "ok" over HTTPS with s's configuration on a loopback port
// until the test ends, and returns its address.
func serveOK(t *testing.T, s ServingTLS) string {
	t.Helper()
	cfg, err := s.Config(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// eventually waits for cond, at most 70 s (dynamiccertificates also
// re-reads files every minute).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 70*time.Second {
			t.Fatalf("%s: not after %s", what, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}
