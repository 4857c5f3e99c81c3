package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// TestProbeCommand: virt-launcher --probe asks the launcher's socket for the
// probe named, passes the timeout, prints the guest's output and exits 0, 1
// or 2 for passed, failed and could not ask.
func TestProbeCommand(t *testing.T) {
	dir, err := os.MkdirTemp("", "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const uid = "3f1e0c2a-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
	sock := client.SocketPath(dir, uid)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.String())
		switch r.URL.Path {
		case "/v1/probe/readiness":
			_ = json.NewEncoder(w).Encode(client.ProbeResult{Success: true, Output: "ok\n"})
		case "/v1/probe/liveness":
			_ = json.NewEncoder(w).Encode(client.ProbeResult{ExitCode: 3, Message: `"check" exited with 3 in the guest`})
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"no such probe"}`))
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	for _, tc := range []struct {
		kind             string
		code             int
		stdout, inStderr string
	}{
		{"readiness", 0, "ok\n", ""},
		{"liveness", 1, "", "exited with 3"},
		{"startup", 2, "", "no such probe"},
	} {
		var stdout, stderr bytes.Buffer
		code := probe([]string{tc.kind, "--kubevirt-share-dir", dir, "--uid", uid, "--timeout-seconds", "4"}, &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.inStderr) {
			t.Errorf("--probe %s = %d, stdout %q, stderr %q; want %d, %q, stderr containing %q", tc.kind, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.inStderr)
		}
	}
	if len(asked) == 0 || asked[0] != "/v1/probe/readiness?timeoutSeconds=4" {
		t.Errorf("requests %q, want the first to be /v1/probe/readiness?timeoutSeconds=4", asked)
	}
	var stderr bytes.Buffer
	if code := probe([]string{"readiness", "--kubevirt-share-dir", dir}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "--uid") {
		t.Errorf("--probe without --uid = %d, %q; want 2 naming --uid", code, stderr.String())
	}
}
