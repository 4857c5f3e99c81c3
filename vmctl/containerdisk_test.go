package vmctl

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testRegistry is go-containerregistry's in-memory registry on
// 127.0.0.1, counting requests, optionally behind basic authentication.
type testRegistry struct {
	host     string
	requests atomic.Int64
}

func newTestRegistry(t *testing.T, tlsServer bool, user, password string) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if u, p, _ := req.BasicAuth(); user != "" && (u != user || p != password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, req)
	})
	s := httptest.NewUnstartedServer(handler)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshakes refused on purpose
	if tlsServer {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	r.host = strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://")
	return r
}

// runVmctl runs vmctl with args and returns what it printed.
func runVmctl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(Options{Name: "vmctl", Streams: streams(strings.NewReader(""), &out, &errOut)})
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// useDockerConfig points docker's credential lookup at a config.json of
// its own, with auths (registry host to "user:password"), for the test.
func useDockerConfig(t *testing.T, auths map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var entries []string
	for host, cred := range auths {
		entries = append(entries, `"`+host+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte(cred))+`"}`)
	}
	cfg := `{"auths":{` + strings.Join(entries, ",") + `}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
}

// testQCOW2 writes a small qcow2 file (version 3 header, then data),
// with a backing file name when backing is set.
func testQCOW2(t *testing.T, dir, name, backing string) (string, []byte) {
	t.Helper()
	h := make([]byte, 104)
	copy(h, "QFI\xfb")
	binary.BigEndian.PutUint32(h[4:], 3)
	if backing != "" {
		binary.BigEndian.PutUint64(h[8:], 104)
		binary.BigEndian.PutUint32(h[16:], uint32(len(backing)))
	}
	data := append(append(h, backing...), "clusters of the guest's disk"...)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, data
}

var digestLine = regexp.MustCompile(`^(.+)@(sha256:[0-9a-f]{64})\n$`)

// pulledDisk pulls ref and returns its platform and its layer's entries
// as "name uid:gid mode content".
func pulledDisk(t *testing.T, ref string) (platform string, entries []string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatalf("the printed reference %q does not parse: %v", ref, err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	return imageDisk(t, img)
}

func imageDisk(t *testing.T, img v1.Image) (platform string, entries []string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Config.Entrypoint) != 0 || len(cf.Config.Cmd) != 0 {
		t.Errorf("image has entrypoint %q, cmd %q; want none", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		entries = append(entries, fmt.Sprintf("%s %d:%d %v %s", h.Name, h.Uid, h.Gid, h.FileInfo().Mode(), data))
	}
	return cf.OS + "/" + cf.Architecture, entries
}

// TestContainerDiskPush pushes a qcow2 file to a local registry (plain
// HTTP on 127.0.0.1, without --insecure), pulls back the printed
// reference and finds the disk where a launcher pod looks; a second push
// prints the same digest.
func TestContainerDiskPush(t *testing.T) {
	useDockerConfig(t, nil)
	reg := newTestRegistry(t, false, "", "")
	path, data := testQCOW2(t, t.TempDir(), "fedora.qcow2", "")
	image := reg.host + "/disks/fedora:41"

	out, errOut, err := runVmctl(t, "containerdisk", "push", path, image)
	if err != nil {
		t.Fatalf("push: %v\nstderr: %s", err, errOut)
	}
	m := digestLine.FindStringSubmatch(out)
	if m == nil || m[1] != reg.host+"/disks/fedora" {
		t.Fatalf("stdout %q, want %s/disks/fedora@sha256:<digest>", out, reg.host)
	}
	if !strings.Contains(errOut, path+": qcow2 image, 132 bytes; reading it into /disk/fedora.qcow2 of a linux/amd64 image") {
		t.Errorf("stderr %q does not say what was found", errOut)
	}
	platform, entries := pulledDisk(t, strings.TrimSuffix(out, "\n"))
	want := []string{"disk/ 107:107 dr-xr-xr-x ", "disk/fedora.qcow2 107:107 -r--r----- " + string(data)}
	if platform != "linux/amd64" {
		t.Errorf("platform %s, want linux/amd64", platform)
	}
	if d := cmp.Diff(want, entries); d != "" {
		t.Errorf("pulled layer (-want +got):\n%s", d)
	}

	again, _, err := runVmctl(t, "containerdisk", "push", path, reg.host+"/other:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(again, m[2]+"\n") {
		t.Errorf("second push printed %q, want the digest %s again", again, m[2])
	}
}

// TestContainerDiskPushOptions: --arch and --disk-name make the image's
// platform and file name; SOURCE_DATE_EPOCH its time.
func TestContainerDiskPushOptions(t *testing.T) {
	useDockerConfig(t, nil)
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	reg := newTestRegistry(t, false, "", "")
	path := filepath.Join(t.TempDir(), "guest.raw")
	if err := os.WriteFile(path, []byte("raw sectors"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runVmctl(t, "containerdisk", "push", "--arch", "arm64", "--disk-name", "disk.img", path, reg.host+"/guest")
	if err != nil {
		t.Fatalf("push: %v\nstderr: %s", err, errOut)
	}
	if !strings.Contains(errOut, ": raw image, 11 bytes; reading it into /disk/disk.img of a linux/arm64 image") {
		t.Errorf("stderr %q", errOut)
	}
	ref := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(ref, reg.host+"/guest@sha256:") {
		t.Fatalf("stdout %q, want %s/guest@sha256:<digest>", out, reg.host)
	}
	platform, entries := pulledDisk(t, ref)
	if platform != "linux/arm64" || len(entries) != 2 || entries[1] != "disk/disk.img 107:107 -r--r----- raw sectors" {
		t.Errorf("pulled %s with %q, want linux/arm64 with disk/disk.img", platform, entries)
	}
	img, err := remote.Image(mustRef(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if !cf.Created.Time.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH's", cf.Created)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestContainerDiskPushCredentials: docker login's credentials
// (config.json) are sent; without them the registry's refusal is the
// error.
func TestContainerDiskPushCredentials(t *testing.T) {
	reg := newTestRegistry(t, false, "alice", "s3cret")
	path, _ := testQCOW2(t, t.TempDir(), "disk.qcow2", "")

	useDockerConfig(t, nil)
	_, _, err := runVmctl(t, "containerdisk", "push", path, reg.host+"/disk:v1")
	if err == nil || !strings.Contains(err.Error(), "pushing "+reg.host+"/disk:v1: ") || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("push without credentials: error %v, want the registry's 401", err)
	}

	useDockerConfig(t, map[string]string{reg.host: "alice:s3cret"})
	out, errOut, err := runVmctl(t, "containerdisk", "push", path, reg.host+"/disk:v1")
	if err != nil || !digestLine.MatchString(out) {
		t.Errorf("push with docker login's credentials: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// TestContainerDiskPushInsecure: a registry with a certificate nobody
// signed is refused, unless --insecure.
func TestContainerDiskPushInsecure(t *testing.T) {
	useDockerConfig(t, nil)
	reg := newTestRegistry(t, true, "", "")
	path, _ := testQCOW2(t, t.TempDir(), "disk.qcow2", "")
	if _, _, err := runVmctl(t, "containerdisk", "push", path, reg.host+"/disk:v1"); err == nil {
		t.Error("push to a registry with an unknown certificate succeeded without --insecure")
	}
	out, errOut, err := runVmctl(t, "containerdisk", "push", "--insecure", path, reg.host+"/disk:v1")
	if err != nil || !digestLine.MatchString(out) {
		t.Errorf("push --insecure: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// TestContainerDiskErrors are refused before anything reaches the
// registry, naming the argument at fault.
func TestContainerDiskErrors(t *testing.T) {
	useDockerConfig(t, nil)
	reg := newTestRegistry(t, false, "", "")
	dir := t.TempDir()
	overlay, _ := testQCOW2(t, dir, "overlay.qcow2", "/images/base.qcow2")
	good, _ := testQCOW2(t, dir, "good.qcow2", "")
	empty := filepath.Join(dir, "empty.img")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	image := reg.host + "/disk:v1"
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"push", overlay, image},
			`FILE: ` + overlay + `: a qcow2 image that refers to another file cannot be a container disk: it has a backing file ("/images/base.qcow2"); make a standalone image with qemu-img convert -O qcow2 <this image> <new file>`},
		{[]string{"push", empty, image}, "FILE: " + empty + " is empty, not a disk image"},
		{[]string{"push", dir, image}, "FILE: " + dir + " is a directory, not a disk image file"},
		{[]string{"push", filepath.Join(dir, "nope.qcow2"), image}, "FILE: open " + filepath.Join(dir, "nope.qcow2") + ": no such file or directory"},
		{[]string{"push", "--arch", "x86_64", good, image}, `--arch "x86_64" is not supported: use amd64, arm64, s390x`},
		{[]string{"push", "--disk-name", "a/b.qcow2", good, image}, `--disk-name "a/b.qcow2": must be a file name, without a slash`},
		{[]string{"push", good, reg.host + "/disk@sha256:" + strings.Repeat("0", 64)},
			`IMAGE "` + reg.host + `/disk@sha256:` + strings.Repeat("0", 64) + `": give a repository with an optional tag, not a digest: the image's digest is printed after the push`},
		{[]string{"push", good, "Upper/Case"}, `IMAGE "Upper/Case": could not parse reference: Upper/Case`},
		{[]string{"push", good}, "accepts 2 arg(s), received 1"},
		{[]string{"build", good}, "--output is required: the archive to write"},
		{[]string{"build", good, "-o", filepath.Join(dir, "x.tar"), "--tag", "a:b:c"}, `--tag "a:b:c": `},
	}
	for _, tc := range tests {
		_, _, err := runVmctl(t, append([]string{"containerdisk"}, tc.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
			t.Errorf("vmctl containerdisk %v: error %v, want %q", tc.args, err, tc.wantErr)
		}
	}
	if n := reg.requests.Load(); n != 0 {
		t.Errorf("the registry got %d requests, want none", n)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, _, err := runVmctl(t, "containerdisk", "push", good, image); err == nil || !strings.Contains(err.Error(), `SOURCE_DATE_EPOCH="yesterday"`) {
		t.Errorf("push with SOURCE_DATE_EPOCH=yesterday: error %v", err)
	}
}

// TestContainerDiskBuild writes the archive of the image push pushes:
// the same digest, readable as docker load reads it.
func TestContainerDiskBuild(t *testing.T) {
	useDockerConfig(t, nil)
	dir := t.TempDir()
	path, data := testQCOW2(t, dir, "Fedora-Cloud 41.qcow2", "")
	archive := filepath.Join(dir, "fedora.tar")
	out, errOut, err := runVmctl(t, "containerdisk", "build", path, "--output", archive)
	if err != nil {
		t.Fatalf("build: %v\nstderr: %s", err, errOut)
	}
	m := digestLine.FindStringSubmatch(out)
	if m == nil || m[1] != "containerdisk/fedora-cloud-41" {
		t.Fatalf("stdout %q, want containerdisk/fedora-cloud-41@sha256:<digest>", out)
	}

	tag, _ := name.NewTag("containerdisk/fedora-cloud-41:latest")
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatal(err)
	}
	platform, entries := imageDisk(t, img)
	want := []string{"disk/ 107:107 dr-xr-xr-x ", "disk/Fedora-Cloud 41.qcow2 107:107 -r--r----- " + string(data)}
	if d := cmp.Diff(want, entries); d != "" || platform != "linux/amd64" {
		t.Errorf("archive's image %s, layer (-want +got):\n%s", platform, d)
	}

	reg := newTestRegistry(t, false, "", "")
	pushed, _, err := runVmctl(t, "containerdisk", "push", path, reg.host+"/fedora:41")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(pushed, "@"+m[2]+"\n") {
		t.Errorf("push printed %q, build %q: want one digest", pushed, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%s holds %d files, want the disk and the archive (no temporary file left)", dir, len(entries))
	}
}

func TestContainerDiskHelp(t *testing.T) {
	out, _, err := runVmctl(t, "containerdisk", "push", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"IMAGE@sha256:<digest>", "containerDisk.image", "docker login", "vmctl containerdisk push Fedora", "prints quay.io/me/fedora@sha256:"} {
		if !strings.Contains(out, s) {
			t.Errorf("push --help does not mention %q:\n%s", s, out)
		}
	}
}
