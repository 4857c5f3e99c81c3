package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/internal/testenv/hostsetup"
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
	serviceClusterIPRange = "10.0.0.0/24,fd00:10:96::/112" // dual stack, IPv4 first
	serviceClusterIP      = "10.0.0.1"                     // first address of serviceClusterIPRange: the kubernetes Service
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
		nodeErr = hostsetup.RemovePodNetwork() // the bridge made for kube-apiserver
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
		if e.nodeLock, err = hostsetup.LockNode(e.Dir); err != nil {
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
