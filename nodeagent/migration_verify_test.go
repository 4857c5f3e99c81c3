package nodeagent

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/pki"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/livemigration"
	"github.com/vmkit/vmkit/nodeagent/restapi"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestSourceVerifiesTheMigration is the security review's N1 scenario: a
// VMI whose status (written by a user where the admission policy is
// missing) names this node as a migration source and any address and port
// as the target. The source agent connects nothing until a
// VirtualMachineInstanceMigration of that UID for this VMI exists and the
// target address is the node agent pod's on the target node; then its
// sockets are the launcher user's (0660), and what it presents is the
// migration proxy's identity, which a node agent's REST API refuses.
func TestSourceVerifiesTheMigration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "mver") // short: sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	share := filepath.Join(dir, "share")

	// issue issues a certificate from tmpl, valid for an hour, signed by ca
	// (self-signed when ca is nil).
	type issued struct {
		cert *x509.Certificate
		key  *ecdsa.PrivateKey
	}
	issue := func(tmpl *x509.Certificate, ca *issued) issued {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		var parent *x509.Certificate
		var parentKey crypto.Signer
		if ca != nil {
			parent, parentKey = ca.cert, ca.key
		}
		cert, key, err := pki.Issue(tmpl, parent, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		return issued{cert, key}
	}
	leaf := func(ca issued, cn string, usage x509.ExtKeyUsage, dns ...string) issued {
		return issue(&x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}, &ca)
	}
	ca := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kubevirt.io@kubevirt"}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil)
	server := leaf(ca, "kubevirt.io:system:node:virt-handler", x509.ExtKeyUsageServerAuth, installstrategy.HandlerServerName)
	migrationClient := leaf(ca, installstrategy.MigrationClientCommonName, x509.ExtKeyUsageClientAuth)
	for name, data := range map[string][]byte{"tls.crt": pki.CertPEM(server.cert), "tls.key": pki.KeyPEM(server.key), "ca": pki.CertPEM(ca.cert),
		"client.crt": pki.CertPEM(migrationClient.cert), "client.key": pki.KeyPEM(migrationClient.key)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// listen serves, as another node's agent, an HTTPS server that accepts
	// only clientName and counts its requests.
	listen := func(clientName string) (port int, hits *atomic.Int64) {
		cfg, err := restapi.ServingTLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: filepath.Join(dir, "ca"), ClientName: clientName}.Config(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		hits = &atomic.Int64{}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			fmt.Fprintf(w, "served %s to %s", r.URL.Path, r.TLS.PeerCertificates[0].Subject.CommonName)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ln.Addr().(*net.TCPAddr).Port, hits
	}
	restPort, restHits := listen(installstrategy.HandlerClientCommonName)
	migrationPort, _ := listen(installstrategy.MigrationClientCommonName)

	serverTLS, err := restapi.ServingTLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: filepath.Join(dir, "ca"), ClientName: installstrategy.MigrationClientCommonName}.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := restapi.ClientTLS{CertFile: filepath.Join(dir, "client.crt"), KeyFile: filepath.Join(dir, "client.key"), CAFile: filepath.Join(dir, "ca"), ServerName: installstrategy.HandlerServerName}.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// tenant runs a launcher of its own for each VMI UID (a launcher asked
	// to migrate stays migrating).
	tenant := func(uid string) *v1.VirtualMachineInstance {
		vmi := orphanVMI("tenant", uid)
		agenttest.RunGuest(t, dir, share, hvfake.New(), vmi)
		vmi.Labels = map[string]string{v1.NodeNameLabel: "node01"}
		return vmi
	}
	vmi := tenant("0d4a0f4e-aaaa-4222-8333-944455556666")
	state := func(port int) *v1.VirtualMachineInstanceMigrationState {
		return &v1.VirtualMachineInstanceMigrationState{
			MigrationUID: types.UID("forged"), SourceNode: "node01", TargetNode: "node02", TargetNodeAddress: "127.0.0.1",
			TargetDirectMigrationNodePorts: map[string]int{strconv.Itoa(port): 0},
		}
	}
	handlerPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "virt-handler-x", Labels: map[string]string{v1.AppLabel: v1.VirtHandlerValue}},
		Spec:       corev1.PodSpec{NodeName: "node02"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}},
	}
	migration := func(vmiName string) *v1.VirtualMachineInstanceMigration {
		return &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "forged"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmiName}}
	}

	// run syncs the VMI once on an agent whose API holds objs and returns
	// the VMI as the agent left it.
	run := func(t *testing.T, vmi *v1.VirtualMachineInstance, port int, migrations []*v1.VirtualMachineInstanceMigration, pods ...*corev1.Pod) *v1.VirtualMachineInstance {
		t.Helper()
		in := vmi.DeepCopy()
		in.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01", MigrationState: state(port)}
		objs := []runtime.Object{in}
		for _, m := range migrations {
			objs = append(objs, m)
		}
		var kobjs []runtime.Object
		for _, p := range pods {
			kobjs = append(kobjs, p)
		}
		vmClient := vmfake.NewSimpleClientset(objs...)
		a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(kobjs...), ShareDir: share,
			KubeletPodsDir: filepath.Join(dir, "pods"), Recorder: record.NewFakeRecorder(100),
			Migration: &livemigration.Config{Address: "127.0.0.1", ServerTLS: serverTLS, ClientTLS: clientTLS, HandlerNamespace: "kubevirt"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.migration.Close)
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		a.factory.Start(sctx.Done())
		a.targetFactory.Start(sctx.Done())
		if !cache.WaitForCacheSync(sctx.Done(), a.informer.HasSynced, a.targetInformer.HasSynced) {
			t.Fatal("cache")
		}
		if _, err := a.sync(sctx, "ns/tenant"); err != nil {
			t.Logf("sync: %v", err)
		}
		out, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "tenant", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	refused := func(t *testing.T, out *v1.VirtualMachineInstance, want string) {
		t.Helper()
		sock := client.MigrationSocket(share, string(out.UID), 0)
		if _, err := os.Lstat(sock); err == nil {
			t.Errorf("the agent serves %s for an unverified migration", sock)
		}
		ms := out.Status.MigrationState
		if ms == nil || !ms.Failed || !ms.Completed || !strings.Contains(ms.FailureReason, want) {
			t.Errorf("migration state %+v, want failed with a reason naming %q", ms, want)
		}
	}

	t.Run("no migration object", func(t *testing.T) {
		refused(t, run(t, vmi, restPort, nil, handlerPod), "no VirtualMachineInstanceMigration of that UID")
	})
	t.Run("a migration of another VMI", func(t *testing.T) {
		refused(t, run(t, vmi, restPort, []*v1.VirtualMachineInstanceMigration{migration("other")}, handlerPod), `migrates "other"`)
	})
	t.Run("a target address that is no node agent's", func(t *testing.T) {
		elsewhere := handlerPod.DeepCopy()
		elsewhere.Spec.NodeName = "node03"
		refused(t, run(t, vmi, restPort, []*v1.VirtualMachineInstanceMigration{migration("tenant")}, elsewhere), "is not the address of a running node agent pod on node node02")
	})
	t.Run("verified: the migration identity reaches a migration listener, not a REST API", func(t *testing.T) {
		tunnel := func(uid string, port int) (string, error) {
			vmi := tenant(uid)
			sock := client.MigrationSocket(share, uid, 0)
			out := run(t, vmi, port, []*v1.VirtualMachineInstanceMigration{migration("tenant")}, handlerPod)
			if ms := out.Status.MigrationState; ms.Failed {
				t.Fatalf("verified migration failed: %s", ms.FailureReason)
			}
			fi, err := os.Stat(sock)
			if err != nil {
				t.Fatalf("no source socket: %v", err)
			}
			if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || int(st.Uid) != os.Getuid() {
				t.Errorf("source socket mode %v owner %d, want 0660 and the launcher's user %d", fi.Mode().Perm(), st.Uid, os.Getuid())
			}
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.WriteString(c, "GET /v1/namespaces/victim/virtualmachineinstances/vm/console HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		}
		if got, err := tunnel("0d4a0f4e-bbbb-4222-8333-944455556666", migrationPort); err != nil || !strings.Contains(got, installstrategy.MigrationClientCommonName) {
			t.Errorf("through the migration listener: %q, %v; want an answer to the migration proxy", got, err)
		}
		if got, err := tunnel("0d4a0f4e-cccc-4222-8333-944455556666", restPort); err == nil {
			t.Errorf("a REST API answered the migration proxy: %q", got)
		}
		if n := restHits.Load(); n != 0 {
			t.Errorf("the REST API served %d requests", n)
		}
	})
}
