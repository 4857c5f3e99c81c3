package webconsole

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

const base = "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/{name}/console/web/{file...}"

func serve(t *testing.T, libs fstest.MapFS, method, path string) *http.Response {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(method+" "+base, Handler(libs))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func complete() fstest.MapFS {
	libs := fstest.MapFS{}
	for _, f := range required {
		libs[f] = &fstest.MapFile{Data: []byte("// " + f)}
	}
	libs["novnc/core/util/logging.js"] = &fstest.MapFile{Data: []byte("export {}")}
	return libs
}

// TestPageAndLibraries: the page, its code and the libraries, with the
// types a browser's module loader needs and a policy that keeps the page
// to its origin.
func TestPageAndLibraries(t *testing.T) {
	const dir = "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm1/console/web/"
	for _, c := range []struct{ path, contentType, body string }{
		{dir, "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{dir + "app.js", "text/javascript; charset=utf-8", "plain.kubevirt.io"},
		{dir + "style.css", "text/css; charset=utf-8", "#viewer"},
		{dir + "lib/xterm/xterm.mjs", "text/javascript; charset=utf-8", "// xterm/xterm.mjs"},
		{dir + "lib/novnc/core/util/logging.js", "text/javascript; charset=utf-8", "export {}"},
	} {
		resp := serve(t, complete(), "GET", c.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != c.contentType || !strings.Contains(string(body), c.body) {
			t.Errorf("GET %s: %d %q, body %.80q; want 200 %q with %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.contentType, c.body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", c.path)
		}
	}
	for _, path := range []string{dir + "nothere.js", dir + "lib/xterm/", dir + "lib/nothere.mjs"} {
		if resp := serve(t, complete(), "GET", path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if resp := serve(t, complete(), "HEAD", dir+"app.js"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD app.js: %d", resp.StatusCode)
	}
}

// TestLibrariesMissing: a virt-api built without hack/build-webconsole.sh
// says so, naming the files and the command, instead of a page that fails
// in the browser with nothing to say.
func TestLibrariesMissing(t *testing.T) {
	libs := complete()
	delete(libs, "novnc/core/rfb.js")
	err := Check(libs)
	if err == nil || !strings.Contains(err.Error(), "novnc/core/rfb.js") || !strings.Contains(err.Error(), "hack/build-webconsole.sh") {
		t.Fatalf("Check: %v", err)
	}
	resp := serve(t, libs, "GET", "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/_/console/web/lib/xterm/xterm.mjs")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "hack/build-webconsole.sh") {
		t.Errorf("a library of an incomplete build: %d %q", resp.StatusCode, body)
	}
	if err := Check(complete()); err != nil {
		t.Errorf("Check of a complete set: %v", err)
	}
}
