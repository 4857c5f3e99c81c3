package exportserver_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/vmkit/vmkit/exportserver"
)

// A filesystem claim mounted at <dir>/pvc is exported raw; requests need
// the token of the token file. Run would serve the same handler over TLS
// until the deadline.
func Example() {
	dir, err := os.MkdirTemp("", "exportserver-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	tokenFile := filepath.Join(dir, "token")
	claim := filepath.Join(dir, "pvc")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		panic(err)
	}
	if err := os.Mkdir(claim, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(claim, "disk.img"), []byte("a tiny disk image"), 0o644); err != nil {
		panic(err)
	}

	srv, err := exportserver.New(exportserver.Config{
		TokenFile: tokenFile,
		Volumes:   []exportserver.Volume{{Path: claim, RawURI: "/volumes/pvc/disk.img"}},
	})
	if err != nil {
		panic(err)
	}
	for _, token := range []string{"", "wrong", "s3cret"} {
		req := httptest.NewRequest("GET", "/volumes/pvc/disk.img", nil)
		if token != "" {
			req.Header.Set(exportserver.TokenHeader, token)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 {
			fmt.Printf("token %q: %d\n", token, rec.Code)
			continue
		}
		fmt.Printf("token %q: %d %s (%s bytes)\n", token, rec.Code, rec.Body, rec.Header().Get("Content-Length"))
	}
	// Output:
	// token "": 401
	// token "wrong": 401
	// token "s3cret": 200 a tiny disk image (17 bytes)
}
