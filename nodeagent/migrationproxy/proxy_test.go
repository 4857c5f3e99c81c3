package migrationproxy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testPKI is a CA with a server and a client certificate, as the
// installation's (installstrategy.EnsureCertificates) are laid out.
type testPKI struct {
	server, client *tls.Config
	pool           *x509.CertPool
	ca             *x509.Certificate
	caKey          *ecdsa.PrivateKey
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &testPKI{pool: x509.NewCertPool(), ca: ca, caKey: caKey}
	p.pool.AddCert(ca)
	server := p.leaf(t, 2, "kubevirt.io:system:node:virt-handler", []string{"virt-handler"}, x509.ExtKeyUsageServerAuth)
	client := p.leaf(t, 3, "kubevirt.io:system:client:virt-handler", nil, x509.ExtKeyUsageClientAuth)
	p.server = &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	p.client = &tls.Config{Certificates: []tls.Certificate{client}, RootCAs: p.pool, ServerName: "virt-handler", MinVersion: tls.VersionTLS12}
	return p
}

func (p *testPKI) leaf(t testing.TB, serial int64, cn string, dns []string, usage x509.ExtKeyUsage) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: dns, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// replyServer listens on a UNIX socket; for each connection it reads until
// the end of stream, then answers "<name>:<what it read>" and closes.
func replyServer(t testing.TB, path, name string) <-chan struct{} {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- struct{}{}:
			default:
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				_, _ = fmt.Fprintf(c, "%s:%s", name, b)
			}()
		}
	}()
	return accepted
}

// at is the socket at path, its directory opened as the node agent does.
func at(t testing.TB, path string) Socket {
	t.Helper()
	d, err := OpenDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	return Socket{Dir: d, Name: filepath.Base(path)}
}

// targets is StartTarget's argument for migration port → socket path.
func targets(t testing.TB, paths map[int]string) map[int]Socket {
	t.Helper()
	out := map[int]Socket{}
	for port, p := range paths {
		out[port] = at(t, p)
	}
	return out
}

// sourceIn is a Source serving in dir (created), its sockets named name(port).
func sourceIn(t testing.TB, dir string, name func(port int) string) Source {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Source{Dir: d, SocketName: name}
}

func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "mpx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// roundTrip sends msg on the UNIX socket path, ends its side and returns
// the answer.
func roundTrip(t testing.TB, path string, msg []byte) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newPair(t testing.TB, pki *testPKI) (target, source *Manager) {
	t.Helper()
	var server, client *tls.Config
	if pki != nil {
		server, client = pki.server, pki.client
	}
	target, err := New(Config{ListenAddress: "127.0.0.1", ServerTLS: server})
	if err != nil {
		t.Fatal(err)
	}
	source, err = New(Config{ListenAddress: "127.0.0.1", ClientTLS: client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	t.Cleanup(source.Close)
	return target, source
}

func TestProxyCarriesEachPortOverMutualTLS(t *testing.T) {
	dir := shortDir(t)
	pki := newPKI(t)
	target, source := newPair(t, pki)
	replyServer(t, filepath.Join(dir, "libvirt-sock"), "libvirt")
	replyServer(t, filepath.Join(dir, "t-49152"), "qemu")
	ports, err := target.StartTarget("uid1", targets(t, map[int]string{LibvirtPort: filepath.Join(dir, "libvirt-sock"), DirectMigrationPort: filepath.Join(dir, "t-49152")}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 {
		t.Fatalf("ports = %v, want two", ports)
	}
	again, err := target.StartTarget("uid1", targets(t, map[int]string{LibvirtPort: filepath.Join(dir, "libvirt-sock"), DirectMigrationPort: filepath.Join(dir, "t-49152")}))
	if err != nil || fmt.Sprint(again) != fmt.Sprint(ports) {
		t.Fatalf("starting the same target again = %v, %v; want the same ports %v", again, err, ports)
	}
	sock := func(port int) string { return filepath.Join(dir, "src", fmt.Sprintf("uid1-%d-source.sock", port)) }
	src := sourceIn(t, filepath.Join(dir, "src"), func(port int) string { return filepath.Base(sock(port)) })
	src.TargetAddress, src.Ports, src.UID, src.GID = "127.0.0.1", ports, 107, 108
	if err := source.StartSource("uid1", src); err != nil {
		t.Fatal(err)
	}
	// The launcher user's sockets, not the world's.
	for _, port := range []int{LibvirtPort, DirectMigrationPort} {
		fi, err := os.Stat(sock(port))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Uid != 107 || st.Gid != 108 {
			t.Errorf("%s: mode %v owner %d:%d, want 0660 107:108", sock(port), fi.Mode().Perm(), st.Uid, st.Gid)
		}
	}
	big := bytes.Repeat([]byte("0123456789"), 200_000) // 2 MB: many TLS records
	if got := roundTrip(t, sock(LibvirtPort), []byte("hello")); got != "libvirt:hello" {
		t.Errorf("through the libvirt port: %q", got)
	}
	if got := roundTrip(t, sock(DirectMigrationPort), big); got != "qemu:"+string(big) {
		t.Errorf("through the direct migration port: %d bytes, want %d", len(got), len(big)+5)
	}
	source.StopSource("uid1")
	if _, err := os.Stat(sock(LibvirtPort)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StopSource left %s: %v", sock(LibvirtPort), err)
	}
	target.StopTarget("uid1")
	for p := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
			c.Close()
			t.Errorf("port %s still accepts after StopTarget", p)
		}
	}
}

func TestTargetRefusesClientsWithoutTheInstallationsCertificate(t *testing.T) {
	dir := shortDir(t)
	pki := newPKI(t)
	other := newPKI(t) // another installation's CA
	target, _ := newPair(t, pki)
	accepted := replyServer(t, filepath.Join(dir, "libvirt-sock"), "libvirt")
	ports, err := target.StartTarget("uid1", targets(t, map[int]string{LibvirtPort: filepath.Join(dir, "libvirt-sock")}))
	if err != nil {
		t.Fatal(err)
	}
	var port string
	for p := range ports {
		port = p
	}
	for name, cfg := range map[string]*tls.Config{
		"no client certificate":              {RootCAs: pki.pool, ServerName: "virt-handler"},
		"another installation's certificate": {Certificates: other.client.Certificates, RootCAs: pki.pool, ServerName: "virt-handler"},
	} {
		c, err := tls.Dial("tcp", "127.0.0.1:"+port, cfg)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte("x"))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Errorf("%s: the target answered", name)
		}
	}
	select {
	case <-accepted:
		t.Error("a client without the installation's certificate reached the target socket")
	case <-time.After(200 * time.Millisecond):
	}
	// And the source side refuses a target whose certificate another CA signed.
	src, err := New(Config{ListenAddress: "127.0.0.1", ClientTLS: other.client})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sock := func(port int) string { return filepath.Join(dir, fmt.Sprintf("o-%d.sock", port)) }
	in := sourceIn(t, dir, func(port int) string { return filepath.Base(sock(port)) })
	in.TargetAddress, in.Ports = "127.0.0.1", ports
	if err := src.StartSource("uid1", in); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock(LibvirtPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("x"))
	_ = c.(*net.UnixConn).CloseWrite()
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Errorf("through a source with another CA: %q, want nothing", b)
	}
}

func TestLongSocketPaths(t *testing.T) {
	dir := shortDir(t)
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 40))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	target, source := newPair(t, newPKI(t))
	replyServer(t, filepath.Join(dir, "l"), "libvirt")
	ports, err := target.StartTarget("k", targets(t, map[int]string{LibvirtPort: filepath.Join(dir, "l")}))
	if err != nil {
		t.Fatal(err)
	}
	sock := func(int) string { return filepath.Join(long, "k-source.sock") }
	if len(sock(0)) <= 107 {
		t.Fatalf("test path %s is not too long for sun_path", sock(0))
	}
	src := sourceIn(t, long, func(int) string { return "k-source.sock" })
	src.TargetAddress, src.Ports = "127.0.0.1", ports
	if err := source.StartSource("k", src); err != nil {
		t.Fatal(err)
	}
	c, err := at(t, sock(0)).Dir.DialUnix(t.Context(), "k-source.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("x"))
	_ = c.CloseWrite()
	if b, _ := io.ReadAll(c); string(b) != "libvirt:x" {
		t.Errorf("through a long socket path: %q", b)
	}
	source.StopSource("k")
	if _, err := os.Stat(sock(0)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StopSource left the long socket: %v", err)
	}
}

// A launcher swaps its directory for a link once the agent opened it, or
// puts a link where its libvirt socket was: the source binds in the
// directory it opened, the target dials no link, and neither touches what
// the links name.
func TestSocketsAreNotReResolved(t *testing.T) {
	dir := shortDir(t)
	target, source := newPair(t, newPKI(t))
	replyServer(t, filepath.Join(dir, "libvirt"), "libvirt")
	elsewhere := filepath.Join(dir, "elsewhere")
	accepted := replyServer(t, filepath.Join(dir, "host.sock"), "host")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	ports, err := target.StartTarget("k", targets(t, map[int]string{LibvirtPort: filepath.Join(dir, "libvirt")}))
	if err != nil {
		t.Fatal(err)
	}
	src := sourceIn(t, filepath.Join(dir, "proxy"), func(int) string { return "k.sock" })
	if err := os.Rename(filepath.Join(dir, "proxy"), filepath.Join(dir, "proxy.real")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "proxy")); err != nil {
		t.Fatal(err)
	}
	src.TargetAddress, src.Ports = "127.0.0.1", ports
	if err := source.StartSource("k", src); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(elsewhere, "k.sock")); err == nil {
		t.Error("the source bound its socket where the link leads")
	}
	if got := roundTrip(t, filepath.Join(dir, "proxy.real", "k.sock"), []byte("x")); got != "libvirt:x" {
		t.Errorf("through the opened directory: %q", got)
	}
	// The target's libvirt socket becomes a link to another socket of the node.
	if err := os.Rename(filepath.Join(dir, "libvirt"), filepath.Join(dir, "libvirt.real")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "host.sock"), filepath.Join(dir, "libvirt")); err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, filepath.Join(dir, "proxy.real", "k.sock"), []byte("x")); got != "" {
		t.Errorf("through a linked target socket: %q, want nothing", got)
	}
	select {
	case <-accepted:
		t.Error("the target proxy connected to the socket the link names")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestPlainTCPOnlyOnLoopback(t *testing.T) {
	if _, err := New(Config{ListenAddress: "0.0.0.0"}); err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Errorf("New without TLS on 0.0.0.0: %v, want an error that it needs TLS", err)
	}
	m, err := New(Config{ListenAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	err = m.StartSource("k", Source{TargetAddress: "10.1.2.3", Ports: map[string]int{"4000": 0}, Dir: at(t, "/tmp/x").Dir, SocketName: func(int) string { return "x" }})
	if err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Errorf("StartSource to 10.1.2.3 without TLS: %v", err)
	}
	err = m.StartSource("k", Source{TargetAddress: "node-b", Ports: map[string]int{"4000": 0}, Dir: at(t, "/tmp/x").Dir, SocketName: func(int) string { return "x" }})
	if err == nil || !strings.Contains(err.Error(), "not an IP address") {
		t.Errorf("StartSource to a host name: %v", err)
	}
}

func TestStopEndsConnectionsInProgress(t *testing.T) {
	dir := shortDir(t)
	target, source := newPair(t, newPKI(t))
	// A server that never answers: the connection stays open.
	ln, err := net.Listen("unix", filepath.Join(dir, "slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	ports, err := target.StartTarget("k", targets(t, map[int]string{LibvirtPort: filepath.Join(dir, "slow")}))
	if err != nil {
		t.Fatal(err)
	}
	sock := func(int) string { return filepath.Join(dir, "k.sock") }
	src := sourceIn(t, dir, func(int) string { return "k.sock" })
	src.TargetAddress, src.Ports = "127.0.0.1", ports
	if err := source.StartSource("k", src); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("in progress")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	target.StopTarget("k")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after StopTarget the connection is still open: %v", err)
	}
}

func TestParsePorts(t *testing.T) {
	for _, tc := range []struct {
		in      map[string]int
		want    map[int]int
		wantErr string
	}{
		{in: map[string]int{"40001": 0, "40002": 49152}, want: map[int]int{40001: 0, 40002: 49152}},
		{in: map[string]int{"40001": 0, "40002": 49152, "40003": 49153}, want: map[int]int{40001: 0, 40002: 49152, 40003: 49153}},
		{in: map[string]int{"40002": 49152}, wantErr: "no port carries libvirt"},
		{in: map[string]int{"x": 0}, wantErr: `key "x" is not a TCP port`},
		{in: map[string]int{"0": 0}, wantErr: `key "0" is not a TCP port`},
		{in: map[string]int{"070": 0}, wantErr: `key "070" is not a TCP port`},
		{in: map[string]int{"65536": 0}, wantErr: `key "65536"`},
		{in: map[string]int{"40001": 22}, wantErr: "22 is not a migration port"},
		{in: map[string]int{"40001": 0, "40002": 0}, wantErr: "both carry 0"},
		{in: nil, wantErr: "no port carries libvirt"},
	} {
		got, err := ParsePorts(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePorts(%v) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ParsePorts(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParsePorts(f *testing.F) {
	f.Add("40001", 0, "40002", 49152)
	f.Add("1", 49153, "65535", 0)
	f.Add("-1", 0, "+5", 49152)
	f.Fuzz(func(t *testing.T, k1 string, v1 int, k2 string, v2 int) {
		in := map[string]int{k1: v1, k2: v2}
		got, err := ParsePorts(in)
		if err != nil {
			return
		}
		libvirt := false
		for tcp, port := range got {
			if tcp < 1 || tcp > 65535 {
				t.Fatalf("ParsePorts(%v) accepted TCP port %d", in, tcp)
			}
			if port != LibvirtPort && port != DirectMigrationPort && port != BlockMigrationPort {
				t.Fatalf("ParsePorts(%v) accepted migration port %d", in, port)
			}
			libvirt = libvirt || port == LibvirtPort
		}
		if !libvirt || len(got) != len(in) {
			t.Fatalf("ParsePorts(%v) = %v", in, got)
		}
	})
}

// FuzzProxyRoundTrip sends arbitrary bytes through a source and a target
// proxy (plain TCP on the loopback, for speed) and checks they arrive
// unchanged, with the end of stream.
func FuzzProxyRoundTrip(f *testing.F) {
	f.Add([]byte("hello"))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0, 255}, 40_000))
	dir := shortDir(f)
	target, source := newPair(f, nil)
	replyServer(f, filepath.Join(dir, "echo"), "e")
	ports, err := target.StartTarget("k", targets(f, map[int]string{LibvirtPort: filepath.Join(dir, "echo")}))
	if err != nil {
		f.Fatal(err)
	}
	sock := func(int) string { return filepath.Join(dir, "k.sock") }
	src := sourceIn(f, dir, func(int) string { return "k.sock" })
	src.TargetAddress, src.Ports = "127.0.0.1", ports
	if err := source.StartSource("k", src); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if got := roundTrip(t, sock(0), msg); got != "e:"+string(msg) {
			t.Fatalf("sent %d bytes, got back %d", len(msg), len(got)-2)
		}
	})
}
