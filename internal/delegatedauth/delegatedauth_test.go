package delegatedauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/internal/delegatedauth"
	"github.com/vmkit/vmkit/internal/testenv"
)

// TestGuard serves /metrics behind a Guard against a real kube-apiserver
// and checks who gets it: the admin (system:masters) by token and by client
// certificate, and a service account bound to a role granting get on
// /metrics; not anonymous requests, unknown tokens, certificates of another
// CA or the front proxy's (with a user header), nor a service account
// without the role (403), nor the bound one for another verb or path.
func TestGuard(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()

	// A service account the API server issues tokens for, and one bound
	// to get on /metrics only.
	for _, name := range []string{"stranger", "scraper"} {
		if _, err := env.Kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		tr, err := env.Kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	guard, err := delegatedauth.New(ctx, delegatedauth.Config{Client: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := delegatedauth.SelfSignedTLS("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard.Handler(ok))
	mux.Handle("/debug/pprof/", guard.Handler(ok))
	mux.Handle("/healthz", ok)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = serverTLS
	srv.StartTLS()
	t.Cleanup(srv.Close)

	pkiDir := filepath.Join(env.Dir, "pki") // testenv's certificates
	clusterCA, clusterKey := readCA(t, filepath.Join(pkiDir, "ca.crt"), filepath.Join(pkiDir, "ca.key"))
	otherCA, otherKey := newCA(t)
	frontProxy, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, "front-proxy-client.crt"), filepath.Join(pkiDir, "front-proxy-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := tls.X509KeyPair(env.Config.CertData, env.Config.KeyData)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		method  string
		path    string
		token   string
		cert    *tls.Certificate
		headers map[string]string
		want    int
	}{
		{name: "health needs nothing", path: "/healthz", want: http.StatusOK},
		{name: "anonymous", path: "/metrics", want: http.StatusUnauthorized},
		{name: "unknown token", path: "/metrics", token: "not-a-token", want: http.StatusUnauthorized},
		{name: "admin token", path: "/metrics", token: env.AdminToken, want: http.StatusOK},
		{name: "admin certificate", path: "/metrics", cert: &admin, want: http.StatusOK},
		{name: "certificate of the cluster CA without the role", path: "/metrics", cert: clientCert(t, clusterCA, clusterKey, "nobody"), want: http.StatusForbidden},
		{name: "certificate of another CA", path: "/metrics", cert: clientCert(t, otherCA, otherKey, "admin"), want: http.StatusUnauthorized},
		{name: "front proxy with a user header", path: "/metrics", cert: &frontProxy, headers: map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}, want: http.StatusUnauthorized},
		{name: "service account without the role", path: "/metrics", token: token("stranger"), want: http.StatusForbidden},
		{name: "service account with the role", path: "/metrics", token: token("scraper"), want: http.StatusOK},
		{name: "service account with the role, another path", path: "/debug/pprof/", token: token("scraper"), want: http.StatusForbidden},
		{name: "service account with the role, another verb", method: http.MethodPost, path: "/metrics", token: token("scraper"), want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientTLS := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the server's certificate is self-signed
			if tc.cert != nil {
				clientTLS.Certificates = []tls.Certificate{*tc.cert}
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}, Timeout: 20 * time.Second}
			defer client.CloseIdleConnections()
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequestWithContext(ctx, method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s: %s %q, want %d", method, tc.path, resp.Status, body, tc.want)
			}
		})
	}
}

// TestGuardWithoutPermission: a component whose account may not create
// reviews lets nobody in.
func TestGuardWithoutPermission(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	if _, err := env.Kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "component"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "component", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	guard, err := delegatedauth.New(ctx, delegatedauth.Config{Client: cfg})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+env.AdminToken)
	guard.Handler(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with the admin's token through a guard that may not create TokenReviews: %d %q, want 401", rec.Code, rec.Body)
	}
}

// TestRequestClientCertificates: a configuration that picks one per client
// asks for a client certificate in each, without requiring one.
func TestRequestClientCertificates(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{ClientAuth: tls.NoClientCert}, nil
	}
	out := delegatedauth.RequestClientCertificates(base)
	if out.ClientAuth != tls.RequestClientCert {
		t.Errorf("ClientAuth = %v, want RequestClientCert", out.ClientAuth)
	}
	picked, err := out.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if picked.ClientAuth != tls.RequestClientCert {
		t.Errorf("picked ClientAuth = %v, want RequestClientCert", picked.ClientAuth)
	}
	if base.ClientAuth != tls.NoClientCert {
		t.Error("the given configuration was changed")
	}
}

func readCA(t *testing.T, certFile, keyFile string) (*x509.Certificate, any) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return ca, pair.PrivateKey
}

func newCA(t *testing.T) (*x509.Certificate, any) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// clientCert is a client certificate for user name signed by ca.
func clientCert(t *testing.T, ca *x509.Certificate, caKey any, name string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}
