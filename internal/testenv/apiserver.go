package testenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	x509pki "github.com/vmkit/vmkit/internal/pki"
)

const (
	// installHint tells a developer how to get the binaries.
	installHint = "install them with `make test-deps` (or hack/setup-k8s.sh) from the module root"

	startTimeout  = 60 * time.Second // per Start, for every component to become ready
	crdTimeout    = 30 * time.Second // per InstallCRDs call
	stopGrace     = 5 * time.Second  // between SIGTERM and SIGKILL
	pollInterval  = 50 * time.Millisecond
	logTailLines  = 30
	logTailWindow = 16 << 10 // bytes read from the end of a log to find its last lines

	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"
	serviceClusterIPRange = "10.0.0.0/24"
	serviceClusterIP      = "10.0.0.1" // first address of serviceClusterIPRange: the kubernetes Service
	adminUser             = "admin"
	mastersGroup          = "system:masters"
	// frontProxyClientName is the common name of the certificate
	// kube-apiserver presents to aggregated API servers.
	frontProxyClientName = "front-proxy-client"
)

// Options selects what Start runs besides etcd and kube-apiserver.
type Options struct {
	// CRDs are installed before Start returns; Start waits until each is
	// Established, has its names accepted and is listed in discovery.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// WithControllerManager also runs kube-controller-manager with all default
	// controllers except nodeipam: garbage collection of owned objects,
	// namespace deletion, default ServiceAccounts, Deployments and so on.
	WithControllerManager bool

	// WithScheduler also runs kube-scheduler, which binds pods to nodes
	// (there are none unless the test registers Node objects).
	WithScheduler bool

	// Node, when set, also runs containerd and a kubelet that registers
	// Node [NodeName] and runs pods (see [NodeOptions]); it needs root and
	// the scheduler (WithScheduler), and only one runs per machine.
	Node *NodeOptions

	// APIServerArgs are appended to kube-apiserver's command line; a flag
	// given here overrides the default one, e.g. "--feature-gates=Foo=true".
	APIServerArgs []string
}

// Env is a running control plane. Its clients act as the cluster admin: user
// "admin" in group system:masters, which every authorizer allows.
type Env struct {
	// Config reaches kube-apiserver as the admin. Copy it with rest.CopyConfig
	// before changing it.
	Config *rest.Config
	// Kube is a clientset built from Config.
	Kube kubernetes.Interface
	// APIExtensions is a clientset for CustomResourceDefinitions built from Config.
	APIExtensions apiextensionsclientset.Interface
	// Dir is the run directory: etcd data, certificates, keys, the
	// kubeconfig and one <component>.log per process. Stop removes it.
	Dir string
	// KubeconfigPath is a kubeconfig file in Dir with the admin credentials
	// embedded, for kubectl and other child processes.
	KubeconfigPath string
	// AdminToken is a bearer token for the same admin identity, for clients
	// that cannot present a client certificate.
	AdminToken string
	// Node is the running node when Options.Node was set (the first of
	// Nodes).
	Node *Node
	// Nodes are the running nodes (NodeOptions.Nodes of them), in order.
	Nodes []*Node
	// Registry is the address (host:port) of the cluster's OCI registry
	// when Options.Node was set: plain HTTP, reachable from this machine;
	// the nodes pull every image from it, for docker.io, quay.io,
	// registry.k8s.io and the other names of internal/registry.Mirrored
	// too. Push an image there (internal/registry, `vmctl containerdisk
	// push`) and pods on the nodes can use it.
	Registry string

	etcdClientURL string
	etcdPeerURL   string
	// componentURLs maps each component's name to the base URL it serves on.
	componentURLs map[string]string

	launcher *launcher
	procsMu  sync.Mutex
	procs    []*process // in start order
	nodeLock *os.File   // held from start until the Node owns it
	// registryPush says what the start pushed to the registry, and how fast.
	registryPush string

	stopOnce sync.Once
	stopErr  error
	logTails string // captured by Stop before the processes end
}

// skipShort skips t under -short, `make unit`, which promises to need
// nothing installed; `make test` (never -short) runs it, and there a
// missing component fails the test instead.
func skipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("testenv: needs %s; skipped under -short (make unit), run by make test", needs)
	}
}

// Start runs etcd and kube-apiserver (plus the components opts asks for),
// installs opts.CRDs and returns once everything is ready. It fails the test
// with t.Fatalf if a binary is missing or a component does not become ready
// within a minute, and skips it under -short (make unit). The control plane is stopped by t.Cleanup; when the test
// failed, the last lines of every component's log are logged first.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	skipShort(t, "etcd and kube-apiserver")
	e := &Env{}
	t.Cleanup(func() {
		err := e.Stop()
		if t.Failed() && e.logTails != "" {
			t.Logf("testenv: last log lines of the control plane:\n%s", e.logTails)
		}
		if err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	began := time.Now()
	if err := e.start(t.Context(), opts); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Logf("testenv: control plane ready at %s in %v (run dir %s)", e.Config.Host, time.Since(began).Round(time.Millisecond), e.Dir)
	if e.registryPush != "" {
		t.Logf("testenv: %s", e.registryPush)
	}
	return e
}

// Launch is Start for programs that are not tests (the demo): it starts the
// same control plane and returns it; the caller must call Stop.
func Launch(ctx context.Context, opts Options) (*Env, error) {
	e := &Env{}
	if err := e.start(ctx, opts); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// RestartAPIServer stops kube-apiserver, waits down for the given time, and
// starts it again with the same flags and port, returning once it is ready.
// Clients keep their configuration; their watches break and must recover,
// which is what tests of API server restarts check.
func (e *Env) RestartAPIServer(ctx context.Context, down time.Duration) error {
	idx := -1
	for i, p := range e.procs {
		if p.name == "kube-apiserver" {
			idx = i
		}
	}
	if idx < 0 {
		return errors.New("testenv: no kube-apiserver running")
	}
	old := e.procs[idx]
	old.stop(stopGrace)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	next, err := e.startProcess("kube-apiserver", old.cmd.Path, old.cmd.Args[1:]...)
	if err != nil {
		return err
	}
	// startProcess appended it; keep the start order instead.
	e.procs = e.procs[:len(e.procs)-1]
	e.procs[idx] = next
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return e.waitAPIServer(ctx, next)
}

// Stop terminates every process (SIGTERM, then SIGKILL after a few seconds),
// waits for them and removes Dir. It is idempotent: later calls return the
// first call's result. Start registers it with t.Cleanup; call it directly only
// to stop the control plane before the test ends.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() { e.stopErr = e.stop() })
	return e.stopErr
}

func (e *Env) stop() error {
	// The logs as they were when the test ended, before shutdown noise.
	e.logTails = e.readLogTails()
	var nodeErr error
	for i := len(e.Nodes) - 1; i >= 0; i-- { // the first, which owns the host's paths, last
		nodeErr = errors.Join(nodeErr, e.Nodes[i].stop())
	}
	if len(e.Nodes) > 0 {
		nodeErr = errors.Join(nodeErr, e.leftovers())
		e.Nodes[0].unlock()
	}
	if e.nodeLock != nil { // the node never started
		nodeErr = removePodNetwork() // the bridge made for kube-apiserver
		e.nodeLock.Close()
	}
	// Reverse start order: clients of kube-apiserver first, etcd last.
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop(stopGrace)
	}
	if nodeErr != nil {
		return fmt.Errorf("stopping the node: %w", nodeErr)
	}
	if e.launcher != nil {
		e.launcher.close()
	}
	if e.Dir != "" {
		if err := os.RemoveAll(e.Dir); err != nil {
			return fmt.Errorf("remove run dir: %w", err)
		}
	}
	return nil
}

// ModuleRoot returns the nearest directory at or above the working directory
// that holds a go.mod file.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for dir := wd; ; {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod in %s or any parent directory", wd)
		}
		dir = parent
	}
}

// BinDir returns the directory holding the control plane binaries:
// $KUBEBUILDER_ASSETS if set, else <module root>/_output/k8s-bin.
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "k8s-bin"), nil
}

// findBinaries returns the path of each named executable in dir, or an error
// that names every missing one and says how to install them.
func findBinaries(dir string, names []string) (map[string]string, error) {
	paths := make(map[string]string, len(names))
	var missing []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, strconv.Quote(name))
			continue
		}
		paths[name] = path
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s in %s ($KUBEBUILDER_ASSETS, else <module root>/_output/k8s-bin); %s",
			strings.Join(missing, ", "), dir, installHint)
	}
	return paths, nil
}

func (e *Env) start(ctx context.Context, opts Options) error {
	binDir, err := BinDir()
	if err != nil {
		return err
	}
	names := []string{"etcd", "kube-apiserver"}
	if opts.WithControllerManager {
		names = append(names, "kube-controller-manager")
	}
	if opts.WithScheduler {
		names = append(names, "kube-scheduler")
	}
	if opts.Node != nil {
		names = append(names, "kubelet", "kube-proxy")
		if opts.Node.Nodes < 0 || opts.Node.Nodes > MaxNodes {
			return fmt.Errorf("Options.Node.Nodes: %d nodes asked for; 1 to %d run on one machine", opts.Node.Nodes, MaxNodes)
		}
	}
	bins, err := findBinaries(binDir, names)
	if err != nil {
		return err
	}

	if e.Dir, err = os.MkdirTemp("", "vmkit-testenv-"); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	// The address kube-apiserver listens on: 127.0.0.1, or with a node the
	// pod network's gateway, so that pods reach it (through the kubernetes
	// Service) as in any cluster.
	apiHost := "127.0.0.1"
	if opts.Node != nil {
		// First, as it may wait for another test's node.
		if e.nodeLock, err = lockNode(e.Dir); err != nil {
			return err
		}
		// A node of an earlier run killed before it could clean up.
		if err := CleanupNode(); err != nil {
			return fmt.Errorf("cleaning up an earlier node: %w", err)
		}
		if err := createPodBridge(); err != nil {
			return err
		}
		apiHost = PodGateway
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	// Generate keys while etcd boots.
	type pkiResult struct {
		p   *pki
		err error
	}
	pkiDone := make(chan pkiResult, 1)
	go func() {
		p, err := newPKI(filepath.Join(e.Dir, "pki"), apiHost)
		pkiDone <- pkiResult{p, err}
	}()
	var p *pki
	getPKI := func() (*pki, error) {
		if p == nil {
			r := <-pkiDone
			if r.err != nil {
				return nil, r.err
			}
			p = r.p
		}
		return p, nil
	}
	var kcmPort, schedulerPort int
	for attempt := 1; ; attempt++ {
		kcmPort, schedulerPort, err = e.startStore(ctx, bins, apiHost, getPKI, opts)
		if err == nil {
			break
		}
		// Another process took a port between its pick and the bind.
		if !errors.Is(err, errPortTaken) || attempt == bindAttempts {
			return err
		}
		if err := e.discardStore(); err != nil {
			return err
		}
	}
	if p, err = getPKI(); err != nil {
		return err
	}

	// Before the controllers start, so that their discovery (garbage
	// collector, quota) sees the custom resources from the beginning.
	if err := e.InstallCRDs(ctx, opts.CRDs...); err != nil {
		return err
	}

	// kube-controller-manager and kube-scheduler serve /healthz with a
	// self-signed certificate they generate in their --cert-dir; it only
	// matters that they answer, so the probe skips verification.
	componentClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer componentClient.CloseIdleConnections()
	var components []*process
	if opts.WithControllerManager {
		kcm, err := e.startProcess("kube-controller-manager", bins["kube-controller-manager"], e.controllerManagerArgs(p, kcmPort)...)
		if err != nil {
			return err
		}
		components = append(components, kcm)
	}
	if opts.WithScheduler {
		scheduler, err := e.startProcess("kube-scheduler", bins["kube-scheduler"], e.schedulerArgs(schedulerPort)...)
		if err != nil {
			return err
		}
		components = append(components, scheduler)
	}
	for _, c := range components {
		if err := waitHealthy(ctx, c, componentClient, e.componentURLs[c.name]+"/healthz"); err != nil {
			return err
		}
	}
	if opts.Node != nil {
		nodeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeTimeout*time.Duration(max(opts.Node.Nodes, 1)))
		defer cancel()
		return e.startNodes(nodeCtx, p, opts.Node, bins)
	}
	return nil
}

// bindAttempts bounds how often Start picks new ports for etcd and
// kube-apiserver when one of them finds its port taken.
const bindAttempts = 3

// pickPorts is freePorts; tests replace it to hand out a taken port.
var pickPorts = freePorts

// errPortTaken: a component exited because its port was in use.
var errPortTaken = errors.New("port already in use")

// startStore picks the control plane's ports and starts etcd and
// kube-apiserver on them, returning once kube-apiserver is ready. It returns
// the ports picked for kube-controller-manager and kube-scheduler.
func (e *Env) startStore(ctx context.Context, bins map[string]string, apiHost string, getPKI func() (*pki, error), opts Options) (kcmPort, schedulerPort int, err error) {
	ports, err := pickPorts(5)
	if err != nil {
		return 0, 0, err
	}
	e.etcdClientURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	e.etcdPeerURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiPort := ports[2]
	kcmPort, schedulerPort = ports[3], ports[4]
	e.componentURLs = map[string]string{
		"etcd":                    e.etcdClientURL,
		"kube-apiserver":          "https://" + net.JoinHostPort(apiHost, strconv.Itoa(apiPort)),
		"kube-controller-manager": "https://127.0.0.1:" + strconv.Itoa(kcmPort),
		"kube-scheduler":          "https://127.0.0.1:" + strconv.Itoa(schedulerPort),
	}
	if e.launcher == nil {
		e.launcher = newLauncher()
	}

	etcd, err := e.startEtcd(bins["etcd"])
	if err != nil {
		return 0, 0, err
	}
	p, err := getPKI()
	if err != nil {
		return 0, 0, err
	}
	if err := e.setupClients(p); err != nil {
		return 0, 0, err
	}
	if err := waitHealthy(ctx, etcd, http.DefaultClient, e.etcdClientURL+"/health"); err != nil {
		return 0, 0, err
	}

	apiserverExtra := opts.APIServerArgs
	if opts.Node != nil {
		nodeArgs, err := nodeAPIServerArgs(p, filepath.Join(e.Dir, "pki"), max(opts.Node.Nodes, 1))
		if err != nil {
			return 0, 0, err
		}
		apiserverExtra = append(nodeArgs, apiserverExtra...)
	}
	apiserver, err := e.startProcess("kube-apiserver", bins["kube-apiserver"], e.apiserverArgs(p, apiHost, apiPort, apiserverExtra)...)
	if err != nil {
		return 0, 0, err
	}
	return kcmPort, schedulerPort, e.waitAPIServer(ctx, apiserver)
}

// discardStore stops what a failed startStore started and removes etcd's
// data, so that the next attempt starts from nothing.
func (e *Env) discardStore() error {
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop(stopGrace)
	}
	e.procs = nil
	return os.RemoveAll(filepath.Join(e.Dir, "etcd-data"))
}

func (e *Env) startEtcd(bin string) (*process, error) {
	args := []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(e.Dir, "etcd-data"),
		"--listen-client-urls=" + e.etcdClientURL,
		"--advertise-client-urls=" + e.etcdClientURL,
		"--listen-peer-urls=" + e.etcdPeerURL,
		"--initial-advertise-peer-urls=" + e.etcdPeerURL,
		"--initial-cluster=testenv=" + e.etcdPeerURL,
		"--initial-cluster-state=new",
	}
	// A throwaway store need not survive a power cut; skipping fsync makes
	// every write, and so the whole test, much faster.
	if help, _ := exec.Command(bin, "--help").CombinedOutput(); bytes.Contains(help, []byte("--unsafe-no-fsync")) {
		args = append(args, "--unsafe-no-fsync")
	}
	return e.startProcess("etcd", bin, args...)
}

// apiserverArgs are kube-apiserver's flags. Listening on 127.0.0.1, it
// publishes no endpoints for the kubernetes Service (none would be
// reachable from a pod); on a node's pod gateway it does, as every cluster.
func (e *Env) apiserverArgs(p *pki, host string, port int, extra []string) []string {
	reconciler := "lease"
	if host == "127.0.0.1" {
		reconciler = "none"
	}
	args := []string{
		"--etcd-servers=" + e.etcdClientURL,
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "kube-apiserver-certs"),
		"--tls-cert-file=" + p.servingCertFile,
		"--tls-private-key-file=" + p.servingKeyFile,
		"--client-ca-file=" + p.caCertFile,
		"--token-auth-file=" + p.tokenFile,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.saPublicKeyFile,
		"--service-account-signing-key-file=" + p.saPrivateKeyFile,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--endpoint-reconciler-type=" + reconciler,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// API aggregation: kube-apiserver proxies requests for an
		// APIService to its server with the front proxy's client
		// certificate and the user in these headers; the aggregated server
		// trusts them by the CA and name it reads from the ConfigMap
		// kube-system/extension-apiserver-authentication. Requests go to the
		// Service's endpoints, as no kube-proxy makes ClusterIPs reachable.
		"--requestheader-client-ca-file=" + p.frontProxyCAFile,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + p.proxyClientCertFile,
		"--proxy-client-key-file=" + p.proxyClientKeyFile,
		"--enable-aggregator-routing=true",
	}
	return append(args, extra...)
}

func (e *Env) controllerManagerArgs(p *pki, port int) []string {
	return []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "kube-controller-manager-certs"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.saPrivateKeyFile,
		"--root-ca-file=" + p.caCertFile,
		"--cluster-signing-cert-file=" + p.caCertFile,
		"--cluster-signing-key-file=" + p.caKeyFile,
		"--controllers=*,-nodeipam",
	}
}

func (e *Env) schedulerArgs(port int) []string {
	return []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "kube-scheduler-certs"),
		"--leader-elect=false",
	}
}

// setupClients fills Config, the clientsets, AdminToken and KubeconfigPath.
// Nothing here talks to the server yet.
func (e *Env) setupClients(p *pki) error {
	host := e.componentURLs["kube-apiserver"]
	e.AdminToken = p.adminToken
	e.Config = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caCertPEM,
			CertData: p.adminCertPEM,
			KeyData:  p.adminKeyPEM,
		},
		// Client-side throttling only slows tests down.
		QPS:   1000,
		Burst: 2000,
	}
	var err error
	if e.Kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("kubernetes clientset: %w", err)
	}
	if e.APIExtensions, err = apiextensionsclientset.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("apiextensions clientset: %w", err)
	}

	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	return writeKubeconfig(e.KubeconfigPath, host, p.caCertPEM, adminUser, p.adminCertPEM, p.adminKeyPEM)
}

// Kubeconfig writes, in a directory of the test's, a kubeconfig that
// points a client at server with no credentials (a fake API server such
// as an httptest.Server), and returns its path.
func Kubeconfig(t testing.TB, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(path, server, nil, "anonymous", nil, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeKubeconfig writes a kubeconfig for server, trusting caPEM, as user
// with the given client certificate and key. It is encoded the way
// clientcmd.Write does, without importing clientcmd (and its flag
// dependencies) into every test binary.
func writeKubeconfig(path, server string, caPEM []byte, user string, certPEM, keyPEM []byte) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: user}
	kc.CurrentContext = "testenv"
	kcJSON, err := k8sruntime.Encode(clientcmdlatest.Codec, kc)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	kcYAML, err := yaml.JSONToYAML(kcJSON)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, kcYAML, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// waitAPIServer waits until /readyz passes and the "default" namespace, which
// a controller inside kube-apiserver creates shortly after start, exists.
func (e *Env) waitAPIServer(ctx context.Context, apiserver *process) error {
	client, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return fmt.Errorf("kube-apiserver HTTP client: %w", err)
	}
	defer client.CloseIdleConnections()
	if err := waitHealthy(ctx, apiserver, client, e.Config.Host+"/readyz?verbose"); err != nil {
		return err
	}
	return poll(ctx, apiserver, `namespace "default"`, func(ctx context.Context) (bool, string) {
		_, err := e.Kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// waitHealthy polls url until it answers 200 OK.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url string) error {
	return poll(ctx, p, url, func(ctx context.Context) (bool, string) {
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusOK {
			return true, ""
		}
		return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, failingChecks(body))
	})
}

// poll calls check until it reports done, p exits or ctx ends. The errors
// name what was awaited, say what check last saw and quote p's log.
func poll(ctx context.Context, p *process, what string, check func(context.Context) (bool, string)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		done, last := check(ctx)
		if done {
			return nil
		}
		select {
		case <-p.done:
			log := tail(p.logPath, logTailLines)
			err := fmt.Errorf("%s exited (%v) while waiting for %s; last lines of %s:\n%s",
				p.name, p.err, what, p.logPath, log)
			if strings.Contains(log, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not ready: %w (last seen: %s); last lines of %s:\n%s",
				p.name, what, ctx.Err(), last, p.logPath, tail(p.logPath, logTailLines))
		case <-ticker.C:
		}
	}
}

// failingChecks keeps the "[-]name failed" lines of a verbose /readyz body,
// or the whole (short) body if it has none.
func failingChecks(body []byte) string {
	var failed []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, line)
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(string(body))
	}
	return strings.Join(failed, "; ")
}

// InstallCRDs creates each CRD, or updates it if one of that name exists, then
// waits until every one is Established, has its names accepted and is served
// in discovery. It gives up after 30 seconds (or when ctx ends) with an error
// naming the CRD that is not ready.
//
// kube-apiserver holds every create of a custom resource for 2 seconds while
// its CRD has been Established for less than 2 seconds (a guard for HA
// clusters), so the first create right after InstallCRDs or Start may take
// that long; InstallCRDs does not wait it out.
func (e *Env) InstallCRDs(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if len(crds) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, crdTimeout)
	defer cancel()
	for _, crd := range crds {
		if crd == nil {
			return errors.New("InstallCRDs: nil CRD")
		}
		if err := e.applyCRD(ctx, crd); err != nil {
			return fmt.Errorf("install CRD %q: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		var last string
		err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
			var ready bool
			ready, last = e.crdReady(ctx, crd)
			return ready, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %q not ready within %v: %s: %w", crd.Name, crdTimeout, last, err)
		}
	}
	return nil
}

func (e *Env) applyCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	client := e.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		desired := crd.DeepCopy()
		desired.ResourceVersion = existing.ResourceVersion
		_, err = client.Update(ctx, desired, metav1.UpdateOptions{})
		return err
	})
}

// crdReady reports whether crd can be used, and if not, why.
func (e *Env) crdReady(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, string) {
	got, err := e.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, want := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.NamesAccepted, apiextensionsv1.Established} {
		if c := findCRDCondition(got, want); c == nil || c.Status != apiextensionsv1.ConditionTrue {
			if c == nil {
				return false, fmt.Sprintf("no %s condition", want)
			}
			return false, fmt.Sprintf("%s=%s: %s: %s", want, c.Status, c.Reason, c.Message)
		}
	}
	if got.Status.AcceptedNames.Plural != crd.Spec.Names.Plural {
		return false, fmt.Sprintf("accepted plural %q, want %q", got.Status.AcceptedNames.Plural, crd.Spec.Names.Plural)
	}
	// Established means the server handles the resource; clients that map
	// kinds to resources through discovery also need it listed there.
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		list, err := e.Kube.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, fmt.Sprintf("discovery of %s: %v", gv, err)
		}
		if !hasResource(list, crd.Spec.Names.Plural) {
			return false, fmt.Sprintf("%s not yet in discovery of %s", crd.Spec.Names.Plural, gv)
		}
	}
	return true, ""
}

func findCRDCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func hasResource(list *metav1.APIResourceList, plural string) bool {
	for _, r := range list.APIResources {
		if r.Name == plural {
			return true
		}
	}
	return false
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners stay open until every port is picked, so none repeats. The
// ports are below the kernel's ephemeral range (net.ipv4.ip_local_port_range),
// which outgoing connections take their local ports from: a port picked there
// can be taken by any connection on the machine before etcd or kube-apiserver
// binds it (seen when test packages run side by side).
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	low, high := portRange()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("pick a free port: none free of 1000 tried in [%d, %d)", low, high)
		}
		port := low + mathrand.IntN(high-low)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePort is a loopback port for a server a test starts, picked as the
// control plane's ports are (see freePorts). It fails the test if none is
// free.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// portRange is where freePorts picks: the 10,000 ports below the ephemeral
// range, and below the default NodePort range (30000-32767), which tests
// with a node use.
func portRange() (low, high int) {
	high = 30000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 11024 {
				high = min(high, lo)
			}
		}
	}
	return high - 10000, high
}

// process is one running control plane component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
	err     error         // cmd.Wait's result; read only after done is closed
}

func (e *Env) startProcess(name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(e.Dir, name+".log")
	// Appending keeps the log of an earlier run of the same component (see RestartAPIServer).
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	// The child keeps its own descriptor of the log file.
	defer logFile.Close()

	cmd := exec.Command(bin, args...)
	cmd.Dir = e.Dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = killWithParent()
	if err := e.launcher.start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	e.procsMu.Lock() // nodes start side by side
	e.procs = append(e.procs, p)
	e.procsMu.Unlock()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL if the process outlives grace, and waits
// for it to exit.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return
	case <-timer.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (e *Env) readLogTails() string {
	var b strings.Builder
	for _, p := range e.procs {
		fmt.Fprintf(&b, "==> %s.log <==\n%s\n", p.name, tail(p.logPath, logTailLines))
	}
	return b.String()
}

// tail returns the last n lines of the file at path, or why it cannot.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	offset := max(fi.Size()-logTailWindow, 0)
	buf := make([]byte, fi.Size()-offset)
	if _, err := f.ReadAt(buf, offset); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if offset > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// launcher starts processes from one goroutine locked to its OS thread until
// the Env stops. Linux sends the parent-death signal when the *thread* that
// forked the child exits, and the Go runtime may end a thread while the test
// binary lives on (when a goroutine exits while locked to it); a dedicated
// locked thread keeps the children alive exactly as long as the Env.
type launcher struct {
	mu     sync.Mutex
	closed bool
	reqs   chan launchRequest
}

type launchRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

func newLauncher() *launcher {
	l := &launcher{reqs: make(chan launchRequest)}
	go l.run()
	return l
}

func (l *launcher) run() {
	// Never unlocked: when run returns, its thread exits, and any child that
	// somehow survived Stop receives its parent-death signal.
	runtime.LockOSThread()
	for r := range l.reqs {
		r.errc <- r.cmd.Start()
	}
}

func (l *launcher) start(cmd *exec.Cmd) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("environment stopped")
	}
	errc := make(chan error, 1)
	l.reqs <- launchRequest{cmd: cmd, errc: errc}
	return <-errc
}

func (l *launcher) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.reqs)
	}
}

// pki holds the files kube-apiserver and its clients need: a CA, a serving
// certificate for 127.0.0.1/localhost, an admin client certificate and token,
// the service account signing key, and for API aggregation a front proxy CA
// and the proxy client certificate it signed.
type pki struct {
	caCertFile, caKeyFile             string
	servingCertFile, servingKeyFile   string
	saPrivateKeyFile, saPublicKeyFile string
	tokenFile                         string
	// frontProxyCAFile verifies proxyClientCertFile, the certificate
	// kube-apiserver presents to aggregated API servers (a CA of its own,
	// so that no client certificate of caCertFile can pass for the proxy).
	frontProxyCAFile                        string
	proxyClientCertFile, proxyClientKeyFile string

	caCertPEM                 []byte
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
	adminCertPEM, adminKeyPEM []byte
	// kubeletClientCertFile and kubeletClientKeyFile are kube-apiserver's
	// client certificate towards kubelets (logs, exec).
	kubeletClientCertFile, kubeletClientKeyFile string
	adminToken                                  string
}

func newPKI(dir, apiHost string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	now := time.Now()
	p := &pki{
		caCertFile:       filepath.Join(dir, "ca.crt"),
		caKeyFile:        filepath.Join(dir, "ca.key"),
		servingCertFile:  filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:   filepath.Join(dir, "apiserver.key"),
		saPrivateKeyFile: filepath.Join(dir, "sa.key"),
		saPublicKeyFile:  filepath.Join(dir, "sa.pub"),
		tokenFile:        filepath.Join(dir, "tokens.csv"),

		frontProxyCAFile:    filepath.Join(dir, "front-proxy-ca.crt"),
		proxyClientCertFile: filepath.Join(dir, "front-proxy-client.crt"),
		proxyClientKeyFile:  filepath.Join(dir, "front-proxy-client.key"),
	}

	ca, caKey, err := x509pki.Issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "vmkit-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	serving, servingKey, err := x509pki.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(apiHost), net.ParseIP(serviceClusterIP)},
	}, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	p.ca, p.caKey = ca, caKey
	if p.adminCertPEM, p.adminKeyPEM, err = p.clientCert(pkix.Name{CommonName: adminUser, Organization: []string{mastersGroup}}); err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	frontProxyCA, frontProxyKey, err := x509pki.Issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "vmkit-testenv-front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("front proxy CA: %w", err)
	}
	proxyClient, proxyClientKey, err := x509pki.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, frontProxyCA, frontProxyKey)
	if err != nil {
		return nil, fmt.Errorf("front proxy client certificate: %w", err)
	}
	// Service account tokens are RS256-signed, as in most clusters.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service account public key: %w", err)
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}

	p.caCertPEM = x509pki.CertPEM(ca)
	p.adminToken = hex.EncodeToString(token)
	caKeyPEM, servingKeyPEM, proxyClientKeyPEM := x509pki.KeyPEM(caKey), x509pki.KeyPEM(servingKey), x509pki.KeyPEM(proxyClientKey)
	files := []struct {
		path string
		data []byte
	}{
		{p.caCertFile, p.caCertPEM},
		{p.caKeyFile, caKeyPEM},
		{p.servingCertFile, x509pki.CertPEM(serving)},
		{p.servingKeyFile, servingKeyPEM},
		{filepath.Join(dir, "admin.crt"), p.adminCertPEM},
		{filepath.Join(dir, "admin.key"), p.adminKeyPEM},
		{p.saPrivateKeyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})},
		{p.saPublicKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})},
		// token,user,uid,groups
		{p.tokenFile, []byte(fmt.Sprintf("%s,%s,%s,%s\n", p.adminToken, adminUser, adminUser, mastersGroup))},
		{p.frontProxyCAFile, x509pki.CertPEM(frontProxyCA)},
		{p.proxyClientCertFile, x509pki.CertPEM(proxyClient)},
		{p.proxyClientKeyFile, proxyClientKeyPEM},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return p, nil
}

// clientCert issues a client certificate for subject, valid for a year and
// signed by the CA, and returns it and its key as PEM.
func (p *pki) clientCert(subject pkix.Name) (certPEMData, keyPEMData []byte, err error) {
	now := time.Now()
	cert, key, err := x509pki.Issue(&x509.Certificate{
		Subject:     subject,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	return x509pki.CertPEM(cert), x509pki.KeyPEM(key), nil
}
