package exportserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/pki"
)

const testToken = "s3cret-token"

// fixture is an exporter pod's files: a filesystem claim, a file standing
// in for a block claim, the manifest directory and the token file.
type fixture struct {
	cfg    Config
	image  []byte // the filesystem claim's disk.img
	device []byte // the non-directory volume's content
	pool   *x509.CertPool
}

// newFixture lays out the files under t.TempDir and returns a Config
// with two volumes and both manifest URIs.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{image: randomBytes(t, 3<<20), device: randomBytes(t, 1<<20+17)}

	claim := filepath.Join(dir, "claim")
	mustWrite(t, filepath.Join(claim, "disk.img"), f.image)
	mustWrite(t, filepath.Join(claim, "sub", "file.txt"), []byte("hello\n"))
	mustWrite(t, filepath.Join(claim, "lost+found", "orphan"), []byte("fsck"))
	if err := os.Symlink("sub/file.txt", filepath.Join(claim, "link")); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	mustWrite(t, tokenFile, []byte(testToken+"\n"))
	if err := os.Symlink(tokenFile, filepath.Join(claim, "escape")); err != nil {
		t.Fatal(err)
	}
	device := filepath.Join(dir, "device")
	mustWrite(t, device, f.device)

	manifests := filepath.Join(dir, "manifest_data")
	mustWrite(t, filepath.Join(manifests, "virtualmachine-manifest"), []byte(`{
		"metadata": {"name": "vm1", "namespace": "ns"},
		"spec": {
			"dataVolumeTemplates": [
				{"metadata": {"name": "other"}, "spec": {"source": {"blank": {}}}},
				{"metadata": {"name": "pvc1"}, "spec": {"source": {"http": {}}, "storage": {"resources": {"requests": {"storage": "3Mi"}}}}}
			],
			"template": {"spec": {"domain": {"cpu": {"cores": 9007199254740993}}}}
		}
	}`))
	mustWrite(t, filepath.Join(manifests, "internal_host"), []byte("virt-export-exp1.ns.svc\n"))
	mustWrite(t, filepath.Join(manifests, "internal_ca_cm"), []byte(`{"metadata": {"name": "export-ca-cm-exp1"}, "data": {"ca.pem": "PEM"}}`))
	mustWrite(t, filepath.Join(manifests, "export-name"), []byte("exp1\n"))

	f.cfg = Config{
		ListenAddr:  "127.0.0.1:0",
		TokenFile:   tokenFile,
		VMURI:       "/manifests/all",
		SecretURI:   "/manifests/secret",
		ManifestDir: manifests,
		Volumes: []Volume{{
			Path:       claim,
			RawURI:     "/volumes/pvc1/disk.img",
			RawGzipURI: "/volumes/pvc1/disk.img.gz",
			ArchiveURI: "/volumes/pvc1/disk.tar.gz",
			DirURI:     "/volumes/pvc1/dir/",
		}, {
			Path:       device,
			RawURI:     "/volumes/pvc2/disk.img",
			RawGzipURI: "/volumes/pvc2/disk.img.gz",
		}},
	}
	f.cfg.CertFile, f.cfg.KeyFile, f.pool = issueServingPair(t, dir)
	return f
}

// issueServingPair writes a certificate for 127.0.0.1 issued by a new CA
// and returns its files and a pool holding only that CA.
func issueServingPair(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	now := time.Now()
	ca, caKey, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, key, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "virt-export-exp1.ns.svc"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	mustWrite(t, certFile, pki.CertPEM(leaf))
	mustWrite(t, keyFile, pki.KeyPEM(key))
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return certFile, keyFile, pool
}

// serve runs the fixture's server with Serve on a 127.0.0.1 port until
// the test ends and returns its base URL and a client trusting only the
// test CA.
func (f *fixture) serve(t *testing.T) (string, *http.Client) {
	t.Helper()
	srv, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.pool}, ForceAttemptHTTP2: true}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return 10s after its context ended")
		}
	})
	return "https://" + ln.Addr().String(), client
}

// get requests url with the token in the header (header) or none, and
// returns the status and body; more headers come as name, value pairs.
func get(t *testing.T, client *http.Client, method, url, token string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, body
}

func TestAuthorization(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"readiness without token", "GET", "/exportready", "", http.StatusOK},
		{"readiness HEAD", "HEAD", "/exportready", "", http.StatusOK},
		{"volume without token", "GET", "/volumes/pvc1/disk.img", "", http.StatusUnauthorized},
		{"volume with a wrong header", "GET", "/volumes/pvc1/disk.img", "wrong", http.StatusUnauthorized},
		{"volume with the token's prefix", "GET", "/volumes/pvc1/disk.img", testToken[:4], http.StatusUnauthorized},
		{"volume with a wrong query parameter", "GET", "/volumes/pvc1/disk.img?x-kubevirt-export-token=wrong", "", http.StatusUnauthorized},
		{"volume with the header", "GET", "/volumes/pvc1/disk.img", testToken, http.StatusOK},
		{"volume with the query parameter", "GET", "/volumes/pvc1/disk.img?x-kubevirt-export-token=" + testToken, "", http.StatusOK},
		{"manifests without token", "GET", "/internal/manifests/all", "", http.StatusUnauthorized},
		{"dir without token", "GET", "/volumes/pvc1/dir/sub/file.txt", "", http.StatusUnauthorized},
		{"POST", "POST", "/volumes/pvc1/disk.img", testToken, http.StatusMethodNotAllowed},
		{"PUT on readiness", "PUT", "/exportready", "", http.StatusMethodNotAllowed},
		{"unknown path", "GET", "/volumes/pvc3/disk.img", testToken, http.StatusNotFound},
		{"the VM URI without a side", "GET", "/manifests/all", testToken, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := get(t, client, tc.method, base+tc.path, tc.token)
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
			}
		})
	}
}

func TestTokenIsReadOnEachRequest(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	mustWrite(t, f.cfg.TokenFile, []byte("rotated"))
	if resp, _ := get(t, client, "GET", base+"/volumes/pvc1/disk.img", testToken); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the replaced token: status %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(t, client, "GET", base+"/volumes/pvc1/disk.img", "rotated"); resp.StatusCode != http.StatusOK {
		t.Errorf("the rotated token: status %d, want 200", resp.StatusCode)
	}
	mustWrite(t, f.cfg.TokenFile, nil)
	if resp, _ := get(t, client, "GET", base+"/volumes/pvc1/disk.img?x-kubevirt-export-token=", ""); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("an empty token file: status %d, want 500", resp.StatusCode)
	}
}

func TestRawImage(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	for _, tc := range []struct {
		name, path string
		content    []byte
	}{
		{"disk.img of a filesystem claim", "/volumes/pvc1/disk.img", f.image},
		{"a non-directory path, sized by seeking", "/volumes/pvc2/disk.img", f.device},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, client, "GET", base+tc.path, testToken)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, tc.content) {
				t.Fatalf("status %d, %d bytes; want 200 and the %d bytes of the image", resp.StatusCode, len(body), len(tc.content))
			}
			if resp.ContentLength != int64(len(tc.content)) {
				t.Errorf("Content-Length %d, want %d", resp.ContentLength, len(tc.content))
			}

			resp, body = get(t, client, "GET", base+tc.path, testToken, "Range", "bytes=1000000-1000099")
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, tc.content[1000000:1000100]) {
				t.Errorf("a range: status %d, %d bytes; want 206 and bytes 1000000-1000099", resp.StatusCode, len(body))
			}
			resp, body = get(t, client, "GET", base+tc.path, testToken, "Range", "bytes=-10")
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, tc.content[len(tc.content)-10:]) {
				t.Errorf("a suffix range: status %d, body %x; want 206 and the last 10 bytes", resp.StatusCode, body)
			}

			resp, body = get(t, client, "HEAD", base+tc.path, testToken)
			if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(tc.content)) || len(body) != 0 {
				t.Errorf("HEAD: status %d, Content-Length %d, %d bytes of body; want 200, %d, none", resp.StatusCode, resp.ContentLength, len(body), len(tc.content))
			}
		})
	}
}

func TestRawImageNotServed(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	image := filepath.Join(f.cfg.Volumes[0].Path, "disk.img")
	for _, tc := range []struct {
		name    string
		replace func() error
		want    int
	}{
		{"a claim without disk.img", func() error { return nil }, http.StatusNotFound},
		{"a disk.img linking out of the claim", func() error { return os.Symlink(f.cfg.TokenFile, image) }, http.StatusInternalServerError},
		{"a directory disk.img", func() error { return os.Mkdir(image, 0o755) }, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.RemoveAll(image); err != nil {
				t.Fatal(err)
			}
			if err := tc.replace(); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"/volumes/pvc1/disk.img", "/volumes/pvc1/disk.img.gz"} {
				resp, body := get(t, client, "GET", base+path, testToken)
				if resp.StatusCode != tc.want || bytes.Contains(body, []byte(testToken)) {
					t.Errorf("%s: status %d, body %.100q; want %d", path, resp.StatusCode, body, tc.want)
				}
			}
		})
	}
}

func TestGzipImage(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	for path, want := range map[string][]byte{"/volumes/pvc1/disk.img.gz": f.image, "/volumes/pvc2/disk.img.gz": f.device} {
		resp, body := get(t, client, "GET", base+path, testToken)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		if got := gunzip(t, body); !bytes.Equal(got, want) {
			t.Errorf("%s decompresses to %d bytes that differ from the image's %d", path, len(got), len(want))
		}
	}
}

func TestArchive(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	resp, body := get(t, client, "GET", base+"/volumes/pvc1/disk.tar.gz", testToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	type entry struct {
		Name     string
		Type     byte
		Linkname string
		Content  string
	}
	var got []entry
	tr := tar.NewReader(bytes.NewReader(gunzip(t, body)))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == "./disk.img" {
			if !bytes.Equal(content, f.image) {
				t.Error("./disk.img in the archive differs from the image")
			}
			content = nil
		}
		got = append(got, entry{hdr.Name, hdr.Typeflag, hdr.Linkname, string(content)})
	}
	want := []entry{
		{"./", tar.TypeDir, "", ""},
		{"./disk.img", tar.TypeReg, "", ""},
		{"./escape", tar.TypeSymlink, f.cfg.TokenFile, ""},
		{"./link", tar.TypeSymlink, "sub/file.txt", ""},
		{"./sub/", tar.TypeDir, "", ""},
		{"./sub/file.txt", tar.TypeReg, "", "hello\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive entries (-want +got):\n%s", diff)
	}
}

func TestDir(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	for _, tc := range []struct {
		name, path   string
		want         int
		bodyContains string
	}{
		{"a file", "/volumes/pvc1/dir/sub/file.txt", http.StatusOK, "hello"},
		{"a symbolic link within the claim", "/volumes/pvc1/dir/link", http.StatusOK, "hello"},
		{"the listing", "/volumes/pvc1/dir/", http.StatusOK, `href="disk.img"`},
		// os.Root refuses it; http.FileServer answers 500 for that error.
		{"a symbolic link out of the claim", "/volumes/pvc1/dir/escape", http.StatusInternalServerError, ""},
		{"a missing file", "/volumes/pvc1/dir/nope", http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, client, "GET", base+tc.path, testToken)
			if resp.StatusCode != tc.want || !strings.Contains(string(body), tc.bodyContains) {
				t.Errorf("status %d, body %.200q; want %d and %q", resp.StatusCode, body, tc.want, tc.bodyContains)
			}
			if strings.Contains(string(body), testToken) {
				t.Error("the response holds the token file's content")
			}
		})
	}
}

func TestVMManifests(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	for _, tc := range []struct {
		name, path, accept string
		extraFiles         map[string]string
		want               int
		kinds              []string
		url, caName        string
	}{
		{name: "internal JSON", path: "/internal/manifests/all", want: 200, kinds: []string{"v1/ConfigMap", "kubevirt.io/v1/VirtualMachine"},
			url: "https://virt-export-exp1.ns.svc/volumes/pvc1/disk.img.gz", caName: "export-ca-cm-exp1"},
		{name: "internal YAML", path: "/internal/manifests/all", accept: "application/yaml", want: 200, kinds: []string{"v1/ConfigMap", "kubevirt.io/v1/VirtualMachine"},
			url: "https://virt-export-exp1.ns.svc/volumes/pvc1/disk.img.gz", caName: "export-ca-cm-exp1"},
		{name: "external without an external host", path: "/external/manifests/all", want: 404},
		{name: "external without a CA", path: "/external/manifests/all", accept: "application/yaml, application/json",
			extraFiles: map[string]string{"external_host": "vmexport-proxy.example.com/api/export.kubevirt.io/v1/namespaces/ns/virtualmachineexports/exp1"},
			want:       200, kinds: []string{"kubevirt.io/v1/VirtualMachine"},
			url: "https://vmexport-proxy.example.com/api/export.kubevirt.io/v1/namespaces/ns/virtualmachineexports/exp1/volumes/pvc1/disk.img.gz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, content := range tc.extraFiles {
				mustWrite(t, filepath.Join(f.cfg.ManifestDir, name), []byte(content))
				t.Cleanup(func() { os.Remove(filepath.Join(f.cfg.ManifestDir, name)) })
			}
			resp, body := get(t, client, "GET", base+tc.path, testToken, "Accept", tc.accept)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want != 200 {
				return
			}
			objects := decodeObjects(t, resp, body, strings.HasPrefix(tc.accept, "application/yaml"))
			var kinds []string
			for _, o := range objects {
				kinds = append(kinds, o["apiVersion"].(string)+"/"+o["kind"].(string))
			}
			if diff := cmp.Diff(tc.kinds, kinds); diff != "" {
				t.Fatalf("objects (-want +got):\n%s", diff)
			}
			vm := objects[len(objects)-1]
			templates := vm["spec"].(map[string]any)["dataVolumeTemplates"].([]any)
			wantSource := map[string]any{"http": map[string]any{"url": tc.url, "secretExtraHeaders": []any{"header-secret-exp1"}}}
			if tc.caName != "" {
				wantSource["http"].(map[string]any)["certConfigMap"] = tc.caName
			}
			if diff := cmp.Diff(wantSource, templates[1].(map[string]any)["spec"].(map[string]any)["source"]); diff != "" {
				t.Errorf("the exported claim's template source (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"blank": map[string]any{}}, templates[0].(map[string]any)["spec"].(map[string]any)["source"]); diff != "" {
				t.Errorf("a claim not exported has its source changed (-want +got):\n%s", diff)
			}
			if !strings.Contains(string(body), "9007199254740993") {
				t.Error("an integer beyond float64's precision was not kept")
			}
		})
	}
}

func TestSecretManifest(t *testing.T) {
	f := newFixture(t)
	base, client := f.serve(t)
	for _, path := range []string{"/internal/manifests/secret", "/external/manifests/secret"} {
		for _, yamlOut := range []bool{false, true} {
			accept := "application/json"
			if yamlOut {
				accept = "application/yaml"
			}
			resp, body := get(t, client, "GET", base+path, testToken, "Accept", accept)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", path, resp.StatusCode)
			}
			objects := decodeObjects(t, resp, body, yamlOut)
			want := []map[string]any{{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": "header-secret-exp1"},
				"stringData": map[string]any{"token": "x-kubevirt-export-token:" + testToken},
			}}
			if diff := cmp.Diff(want, objects); diff != "" {
				t.Errorf("%s (%s) (-want +got):\n%s", path, accept, diff)
			}
		}
	}
}

// decodeObjects decodes a manifests answer: YAML documents each ended by
// "---\n", or a JSON v1 List.
func decodeObjects(t *testing.T, resp *http.Response, body []byte, yamlOut bool) []map[string]any {
	t.Helper()
	var objects []map[string]any
	if yamlOut {
		if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
			t.Errorf("Content-Type %q, want application/yaml", ct)
		}
		docs := strings.Split(string(body), "---\n")
		if docs[len(docs)-1] != "" {
			t.Errorf("the YAML does not end with ---: %q", body)
		}
		for _, doc := range docs[:len(docs)-1] {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%v in %q", err, doc)
			}
			objects = append(objects, o)
		}
		return objects
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var list struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("a %s %s, want a v1 List", list.APIVersion, list.Kind)
	}
	if !bytes.Contains(body, []byte("\n    \"items\"")) {
		t.Errorf("the JSON is not indented: %.100s", body)
	}
	return list.Items
}

func TestConfigFromEnv(t *testing.T) {
	base := []string{"CERT_FILE=/certs/tls.crt", "KEY_FILE=/certs/tls.key", "TOKEN_FILE=/token/token", "PATH=/usr/bin", "VOLUME=x", "VOLUMES_X=y"}
	for _, tc := range []struct {
		name    string
		env     []string
		want    Config
		wantErr string
	}{{
		name: "two volumes, manifests and a deadline",
		env: append(slices.Clone(base),
			"DEADLINE=2026-05-01T10:00:00Z",
			"EXPORT_VM_DEF_URI=/manifests/all", "EXPORT_SECRET_DEF_URI=/manifests/secret",
			"VOLUME1_EXPORT_PATH=/dev/export-volumes/blk", "VOLUME1_EXPORT_RAW_URI=/volumes/blk/disk.img", "VOLUME1_EXPORT_RAW_GZIP_URI=/volumes/blk/disk.img.gz",
			"VOLUME0_EXPORT_PATH=/export-volumes/fs", "VOLUME0_EXPORT_RAW_URI=/volumes/fs/disk.img", "VOLUME0_EXPORT_RAW_GZIP_URI=/volumes/fs/disk.img.gz",
			"VOLUME0_EXPORT_ARCHIVE_URI=/volumes/fs/disk.tar.gz", "VOLUME0_EXPORT_DIR_URI=/volumes/fs/dir/", "VOLUME0_EXPORT_UNKNOWN=ignored"),
		want: Config{
			ListenAddr: ":8443", ManifestDir: "/manifest_data",
			CertFile: "/certs/tls.crt", KeyFile: "/certs/tls.key", TokenFile: "/token/token",
			Deadline: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC),
			VMURI:    "/manifests/all", SecretURI: "/manifests/secret",
			Volumes: []Volume{
				{Path: "/export-volumes/fs", RawURI: "/volumes/fs/disk.img", RawGzipURI: "/volumes/fs/disk.img.gz", ArchiveURI: "/volumes/fs/disk.tar.gz", DirURI: "/volumes/fs/dir/"},
				{Path: "/dev/export-volumes/blk", RawURI: "/volumes/blk/disk.img", RawGzipURI: "/volumes/blk/disk.img.gz"},
			},
		},
	}, {
		name: "nothing optional",
		env:  base,
		want: Config{ListenAddr: ":8443", ManifestDir: "/manifest_data", CertFile: "/certs/tls.crt", KeyFile: "/certs/tls.key", TokenFile: "/token/token"},
	}, {
		name:    "a bad deadline",
		env:     append(slices.Clone(base), "DEADLINE=tomorrow"),
		wantErr: `DEADLINE="tomorrow" is not an RFC 3339 time`,
	}, {
		name:    "a URI without a path",
		env:     append(slices.Clone(base), "VOLUME0_EXPORT_PATH=/a", "VOLUME0_EXPORT_RAW_URI=/volumes/a/disk.img", "VOLUME1_EXPORT_DIR_URI=/volumes/b/dir/"),
		wantErr: "VOLUME1_EXPORT_PATH is not set, but VOLUME1_EXPORT_DIR_URI is",
	}, {
		name:    "no token file",
		env:     base[:2],
		wantErr: "TOKEN_FILE is not set",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromEnv(tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewRejectsBadURIs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"a relative URI", Config{Volumes: []Volume{{Path: "/a", RawURI: "volumes/a/disk.img"}}}, "not an absolute path"},
		{"a dir URI without a slash", Config{Volumes: []Volume{{Path: "/a", DirURI: "/volumes/a/dir"}}}, "does not end with a slash"},
		{"a raw URI with a slash", Config{Volumes: []Volume{{Path: "/a", RawURI: "/volumes/a/"}}}, "ends with a slash"},
		{"the same URI twice", Config{Volumes: []Volume{{Path: "/a", RawURI: "/v/disk.img"}, {Path: "/b", RawGzipURI: "/v/disk.img"}}}, "two routes"},
		{"the readiness path", Config{Volumes: []Volume{{Path: "/a", RawURI: "/exportready"}}}, "two routes"},
		{"a URI without a path", Config{Volumes: []Volume{{RawURI: "/v/disk.img"}}}, "no path"},
		{"a relative manifest URI", Config{VMURI: "manifests/all"}, "not an absolute path"},
		{"no token file", Config{}, "no token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.TokenFile == "" && tc.wantErr != "no token file" {
				tc.cfg.TokenFile = "/token"
			}
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunReturnsAtTheDeadline(t *testing.T) {
	f := newFixture(t)
	f.cfg.Deadline = time.Now().Add(300 * time.Millisecond)
	srv, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v, want nil", err)
		}
		if early := time.Until(f.cfg.Deadline); early > 0 {
			t.Errorf("Run returned %v before the deadline", early)
		}
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Run did not return 10s after a deadline 300ms away")
	}
}

func TestRunFailsWithoutItsCertificate(t *testing.T) {
	f := newFixture(t)
	f.cfg.KeyFile = filepath.Join(t.TempDir(), "missing.key")
	srv, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "serving certificate") {
		t.Errorf("Run without a key: %v, want an error about the serving certificate", err)
	}
}

func TestWantsYAML(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                   false,
		"application/yaml":                   true,
		"application/yaml; charset=utf-8":    true,
		"application/json, application/yaml": false,
		"text/plain, application/yaml":       true,
		"*/*":                                false,
		"garbage;;":                          false,
	} {
		if got := wantsYAML([]string{accept}); got != want {
			t.Errorf("wantsYAML(%q) = %v, want %v", accept, got, want)
		}
	}
}

// BenchmarkGzipImage measures the gzip route's throughput on an
// incompressible image (the worst case), through the handler without
// TLS.
func BenchmarkGzipImage(b *testing.B) {
	f := newFixture(b)
	srv, err := New(f.cfg)
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	// The zero logger discards the download log.
	req, err := http.NewRequestWithContext(klog.NewContext(b.Context(), klog.Logger{}), "GET", "/volumes/pvc1/disk.img.gz", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set(TokenHeader, testToken)
	b.SetBytes(int64(len(f.image)))
	for b.Loop() {
		w := &discardWriter{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return out
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWrite(t testing.TB, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}
