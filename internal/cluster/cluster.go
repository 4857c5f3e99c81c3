// Package cluster brings up vmkit the way a user meets it, on one machine:
// a real control plane and a real node (containerd + kubelet, see
// internal/testenv; or two nodes, Options.Nodes) pulling vmkit's images
// from the machine's OCI registry, a release published there whose
// manifests install the operator, and the KubeVirt CR from which the
// operator installs everything else (InstallOperator). The end-to-end tests and `make demo`
// use it.
//
// vmkit's components run as ordinary pods on the node's pod network, as in
// KubeVirt: they reach kube-apiserver through the kubernetes Service, which
// kube-proxy routes, and virt-handler keeps the host privileges it needs
// (privileged, hostPID, the kubelet's directories). [Options.HostNetwork]
// installs them in host-network mode instead (installstrategy.
// EnvHostNetwork): on the node's network, listening on kube-apiserver's
// address and reaching it directly. The operator installs virt-api behind
// the APIService v1.subresources.kubevirt.io, so virtctl and vmctl work
// through kube-apiserver as on any cluster.
package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/registry"
	"github.com/vmkit/vmkit/internal/release"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Names of what the cluster installs.
const (
	// Namespace holds the operator, the components and the KubeVirt CR.
	Namespace = installstrategy.DefaultNamespace
	// KubeVirtName is the KubeVirt CR's name.
	KubeVirtName = "kubevirt"
	// DefaultTag is the tag hack/build-images.sh gives the images.
	DefaultTag = "devel"
	// Registry is the registry part the image archives' references carry
	// (vmkit/virt-api:devel, that is docker.io/vmkit/virt-api:devel): the
	// local registry serves them under that name too.
	Registry = "vmkit"
	// ReleaseRegistry is where InstallOperator publishes the release it
	// installs: the local registry, as a platform team's would be.
	ReleaseRegistry = registry.DefaultAddr + "/vmkit"
)

// Images are the image tarballs (under the images directory) a cluster
// imports, as hack/build-images.sh names them.
var Images = []string{"pause", "virt-operator", "virt-controller", "virt-api", "virt-handler", "virt-exportserver", "virt-launcher", "tiny-guest", "local-path-provisioner", "busybox", "cloud-guest"}

// HugePages2Mi is the number of 2 MiB huge pages a one-node cluster's
// node offers (256 MiB: a guest of the test images fits twice).
const HugePages2Mi = 128

// ImagesDirEnv, when set, names the directory of the image tarballs.
const ImagesDirEnv = "VMKIT_IMAGES_DIR"

// Options configure a cluster.
type Options struct {
	// ImagesDir holds the image tarballs (default $VMKIT_IMAGES_DIR, else
	// <module root>/_output/images).
	ImagesDir string
	// Tag of vmkit's images (default "devel").
	Tag string
	// HostNetwork installs the components in host-network mode (see the
	// package doc) instead of on the pod network. Only with one node: the
	// nodes share the host's network, where two node agents would listen
	// on the same address and ports.
	HostNetwork bool
	// Nodes is how many nodes the cluster has (default 1; see
	// testenv.NodeOptions.Nodes): Node localhost, then localhost-2, ...
	Nodes int
}

// Cluster is a running cluster of one node (or Options.Nodes) with vmkit
// installed.
type Cluster struct {
	// Env is the control plane and node when this process runs them
	// (New); nil for a cluster another process runs (Connect).
	Env *testenv.Env
	// Config reaches kube-apiserver as the cluster admin.
	Config  *rest.Config
	Kube    kubernetes.Interface
	Client  versioned.Interface
	Dynamic dynamic.Interface
	// Tag is the image tag installed.
	Tag string
	// HostNetwork: the components run in host-network mode.
	HostNetwork bool
	// Nodes is the number of nodes.
	Nodes int
	// ImagesDir holds the image archives.
	ImagesDir string
	// Release is what InstallOperator published and installed.
	Release *release.Published
	// ReleaseDir holds the release manifests InstallOperator applied
	// (kubevirt-operator.yaml, kubevirt-cr.yaml).
	ReleaseDir string
}

func (o *Options) defaults() error {
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 1 || o.Nodes > testenv.MaxNodes {
		return fmt.Errorf("cluster: Options.Nodes is %d; 1 to %d nodes run on one machine", o.Nodes, testenv.MaxNodes)
	}
	if o.HostNetwork && o.Nodes > 1 {
		return fmt.Errorf("cluster: Options.HostNetwork with %d nodes: every node agent would listen on the host's network at the same address and ports; host-network mode runs one node", o.Nodes)
	}
	if o.Tag == "" {
		o.Tag = DefaultTag
	}
	if o.ImagesDir == "" {
		o.ImagesDir = os.Getenv(ImagesDirEnv)
	}
	if o.ImagesDir == "" {
		root, err := testenv.ModuleRoot()
		if err != nil {
			return err
		}
		o.ImagesDir = filepath.Join(root, "_output", "images")
	}
	return nil
}

// ImageTarballs returns the paths of Images in dir, or an error naming the
// command that builds the missing ones.
func ImageTarballs(dir string) ([]string, error) {
	var out, missing []string
	for _, name := range Images {
		p := filepath.Join(dir, name+".tar")
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
		out = append(out, p)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("image tarballs missing: %s; build them with `hack/build-images.sh` (run by `make test-deps`)", strings.Join(missing, ", "))
	}
	return out, nil
}

// NodeOptions are the testenv options of a cluster's control plane and node.
func NodeOptions(o Options) (testenv.Options, error) {
	if err := o.defaults(); err != nil {
		return testenv.Options{}, err
	}
	images, err := ImageTarballs(o.ImagesDir)
	if err != nil {
		return testenv.Options{}, err
	}
	node := &testenv.NodeOptions{Images: images, Nodes: o.Nodes, Multus: true}
	if o.Nodes == 1 {
		// One node has what VMIs with dedicated CPUs and huge pages need,
		// as a platform team's VM nodes do. With several, the nodes share
		// the machine's CPUs and huge page pool, which each would count
		// as its own.
		node.CPUManager = true
		node.HugePages2Mi = HugePages2Mi
	}
	return testenv.Options{WithControllerManager: true, WithScheduler: true, Node: node}, nil
}

// New wraps a running control plane and node (started with NodeOptions).
func New(env *testenv.Env, o Options) (*Cluster, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if env.Node == nil {
		return nil, errors.New("cluster: the environment runs no node")
	}
	if len(env.Nodes) != o.Nodes {
		return nil, fmt.Errorf("cluster: the environment runs %d nodes, Options.Nodes says %d", len(env.Nodes), o.Nodes)
	}
	c, err := Connect(env.Config, o)
	if err != nil {
		return nil, err
	}
	c.Env = env
	return c, nil
}

// Connect reaches a cluster another process runs (see hack/cluster).
func Connect(cfg *rest.Config, o Options) (*Cluster, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	c := &Cluster{Config: cfg, Tag: o.Tag, HostNetwork: o.HostNetwork, Nodes: o.Nodes, ImagesDir: o.ImagesDir}
	var err error
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Client, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// operatorConfig is the installation of the release p on this cluster:
// one replica and, in host-network mode, the components on the node's
// network, listening on kube-apiserver's address and reaching it there.
func (c *Cluster) operatorConfig(p *release.Published) installstrategy.OperatorConfig {
	cfg := p.OperatorConfig()
	cfg.Replicas = 1
	if c.HostNetwork {
		host, port := c.apiServerAddress()
		cfg.HostNetwork = host
		cfg.Env = map[string]string{
			// The operator's own client, and through the passthrough
			// prefix every component's, reach the API server directly.
			"KUBERNETES_SERVICE_HOST": host,
			"KUBERNETES_SERVICE_PORT": port,
			installstrategy.EnvPassthroughPrefix + "KUBERNETES_SERVICE_HOST": host,
			installstrategy.EnvPassthroughPrefix + "KUBERNETES_SERVICE_PORT": port,
		}
	}
	return cfg
}

// apiServerAddress is kube-apiserver's host and port.
func (c *Cluster) apiServerAddress() (host, port string) {
	u, _ := url.Parse(c.Config.Host)
	return u.Hostname(), u.Port()
}

// resources maps the kinds of the operator's installation to their resources.
var resources = map[string]struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	"Namespace":                {schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
	"CustomResourceDefinition": {schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, false},
	"ServiceAccount":           {schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
	"ClusterRole":              {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, false},
	"ClusterRoleBinding":       {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, false},
	"Role":                     {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, true},
	"RoleBinding":              {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, true},
	"Deployment":               {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
}

// InstallOperator installs vmkit as a platform team installs a release:
// it publishes the components' images (the archives of ImagesDir, tag Tag)
// to the local registry as release Tag (internal/release: indexes under
// ReleaseRegistry), writes the release manifests into a directory of the run
// (ReleaseDir), applies kubevirt-operator.yaml (server-side apply, so it can
// run again) and creates the CR of kubevirt-cr.yaml asking for emulation
// and one replica of each component. The nodes pull everything from the
// registry, by digest.
func (c *Cluster) InstallOperator(ctx context.Context) error {
	p, err := release.Publish(ctx, release.Options{
		Registry: ReleaseRegistry, Version: c.Tag,
		Archives: map[string]string{runtime.GOARCH: c.ImagesDir},
		Images:   release.Components,
	})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vmkit-release-")
	if err != nil {
		return err
	}
	if err := p.WriteManifests(dir, c.operatorConfig(p)); err != nil {
		return err
	}
	c.Release, c.ReleaseDir = p, dir
	objs, err := readManifest(filepath.Join(dir, release.OperatorManifest))
	if err != nil {
		return err
	}
	for _, u := range objs {
		kind := u.GetKind()
		r, ok := resources[kind]
		if !ok {
			return fmt.Errorf("cluster: %s: no resource for kind %s", release.OperatorManifest, kind)
		}
		var ri dynamic.ResourceInterface = c.Dynamic.Resource(r.gvr)
		if r.namespaced {
			ri = c.Dynamic.Resource(r.gvr).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "vmkit-cluster", Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", kind, u.GetName(), err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, release.CRManifest))
	if err != nil {
		return err
	}
	kv := &v1.KubeVirt{}
	if err := yaml.UnmarshalStrict(data, kv); err != nil {
		return fmt.Errorf("cluster: %s: %w", release.CRManifest, err)
	}
	// Guests run on KVM where this machine has a working /dev/kvm, as on a
	// KubeVirt node, and under TCG where it has not (useEmulation), and VMs
	// may keep a persistent TPM or EFI store on backend storage (the local
	// cluster has a default StorageClass) and grow their disks with their
	// claims (ExpandDisks).
	replicas := uint8(1)
	kvm, _ := KVM()
	kv.Spec.Configuration.DeveloperConfiguration = &v1.DeveloperConfiguration{
		UseEmulation: !kvm, FeatureGates: []string{podtemplate.VMPersistentStateGate, podtemplate.ExpandDisksGate}}
	kv.Spec.Infra = &v1.ComponentConfig{Replicas: &replicas}
	// The CRD was just created: retry until its resource is served.
	return poll(ctx, 200*time.Millisecond, func() (bool, error) {
		_, err := c.Client.KubevirtV1().KubeVirts(kv.Namespace).Create(ctx, kv, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return true, nil
		case apierrors.IsNotFound(err): // the resource is not served yet
			return false, nil
		}
		return false, fmt.Errorf("creating KubeVirt %s/%s: %w", kv.Namespace, kv.Name, err)
	})
}

// readManifest reads a multi-document YAML file of Kubernetes objects.
func readManifest(file string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
	}
}

// Install installs vmkit as a user does, through its operator
// (InstallOperator), with the storage (InstallStorage), and waits until
// KubeVirt is available, every node schedulable and the storage provisioner
// ready. A failure carries the last lines of vmkit's pod logs.
func (c *Cluster) Install(ctx context.Context, storage StorageOptions) error {
	steps := []func(context.Context) error{
		c.InstallOperator,
		func(ctx context.Context) error { return c.InstallStorage(ctx, storage) },
		c.WaitAvailable,
		c.WaitNodesSchedulable,
		c.WaitStorage,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return fmt.Errorf("%w\n%s", err, c.PodLogs(context.Background(), Namespace, v1.AppLabel, 40))
		}
	}
	return nil
}

// WaitAvailable waits until the KubeVirt CR is Deployed with Available=True
// (every component rolled out and ready) and kube-apiserver reports virt-api's
// APIService Available.
func (c *Cluster) WaitAvailable(ctx context.Context) error {
	if err := c.waitKubeVirtAvailable(ctx); err != nil {
		return err
	}
	return c.waitAPIServiceAvailable(ctx)
}

// waitAPIServiceAvailable waits for the APIService of virt-api's group.
func (c *Cluster) waitAPIServiceAvailable(ctx context.Context) error {
	name := "v1." + installstrategy.SubresourcesGroup
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	last := "not found"
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		u, err := c.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("Available=%v (%v: %v)", m["status"], m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not available: %w (last seen: %s)", name, err, last)
	}
	return nil
}

func (c *Cluster) waitKubeVirtAvailable(ctx context.Context) error {
	var last string
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		kv, err := c.Client.KubevirtV1().KubeVirts(Namespace).Get(ctx, KubeVirtName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = "phase " + string(kv.Status.Phase)
		for _, cond := range kv.Status.Conditions {
			if cond.Type == v1.KubeVirtConditionAvailable {
				last += fmt.Sprintf(", Available=%s (%s: %s)", cond.Status, cond.Reason, cond.Message)
				return kv.Status.Phase == v1.KubeVirtPhaseDeployed && cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("KubeVirt %s/%s not available: %w (last seen: %s)", Namespace, KubeVirtName, err, last)
	}
	return nil
}

// WaitNodesSchedulable waits until every node of the cluster (Nodes of
// them) is Ready and labeled kubevirt.io/schedulable=true with a heartbeat
// by the node agent running on it (a Running virt-handler pod on the node):
// launcher pods can go to any of them.
func (c *Cluster) WaitNodesSchedulable(ctx context.Context) error {
	last := "no nodes"
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		handlers, err := c.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		handlerOn := map[string]bool{}
		for _, p := range handlers.Items {
			handlerOn[p.Spec.NodeName] = handlerOn[p.Spec.NodeName] || (p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil)
		}
		var waiting []string
		for _, n := range nodes.Items {
			ready := false
			for _, cond := range n.Status.Conditions {
				ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
			}
			if !ready || n.Labels[v1.NodeSchedulable] != "true" || n.Annotations[v1.VirtHandlerHeartbeat] == "" || !handlerOn[n.Name] {
				waiting = append(waiting, fmt.Sprintf("%s (Ready %v, %s=%q, heartbeat %q, virt-handler running %v)", n.Name, ready,
					v1.NodeSchedulable, n.Labels[v1.NodeSchedulable], n.Annotations[v1.VirtHandlerHeartbeat], handlerOn[n.Name]))
			}
		}
		last = fmt.Sprintf("%d of %d nodes; waiting for %s", len(nodes.Items), c.Nodes, strings.Join(waiting, ", "))
		return len(nodes.Items) == c.Nodes && len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not schedulable: %w (last seen: %s)", err, last)
	}
	return nil
}

// HandlerAddress is where a node agent's REST API listens: its pod's
// address, or kube-apiserver's in host-network mode. With several nodes it
// is any node's agent; HandlerAddressOn names the node.
func (c *Cluster) HandlerAddress(ctx context.Context) (string, error) {
	return c.HandlerAddressOn(ctx, "")
}

// HandlerAddressOn is where the node agent of node listens (any node's
// when node is empty).
func (c *Cluster) HandlerAddressOn(ctx context.Context, node string) (string, error) {
	port := fmt.Sprint(installstrategy.HandlerConsolePort)
	if c.HostNetwork {
		host, _ := c.apiServerAddress()
		return net.JoinHostPort(host, port), nil
	}
	pods, err := c.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) {
			return net.JoinHostPort(p.Status.PodIP, port), nil
		}
	}
	if node != "" {
		return "", fmt.Errorf("no running virt-handler pod on node %s in namespace %s", node, Namespace)
	}
	return "", fmt.Errorf("no running virt-handler pod in namespace %s", Namespace)
}

// vmiHandlerAddress is the address of the node agent of the node a VMI
// runs on.
func (c *Cluster) vmiHandlerAddress(ctx context.Context, namespace, name string) (string, error) {
	if c.Nodes <= 1 {
		return c.HandlerAddress(ctx)
	}
	vmi, err := c.Client.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if vmi.Status.NodeName == "" {
		return "", fmt.Errorf("VMI %s/%s is on no node yet (phase %s)", namespace, name, vmi.Status.Phase)
	}
	return c.HandlerAddressOn(ctx, vmi.Status.NodeName)
}

// Console reads the serial console of a VMI through the console endpoint
// of the node agent of its node (with the client certificate the operator created)
// until a line holding marker arrived, and returns the console's lines.
func (c *Cluster) Console(ctx context.Context, namespace, name, marker string) ([]string, error) {
	tlsConfig, err := c.handlerTLS(ctx)
	if err != nil {
		return nil, err
	}
	addr, err := c.vmiHandlerAddress(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	u := fmt.Sprintf("wss://%s/v1/namespaces/%s/virtualmachineinstances/%s/console?history=true", addr, namespace, name)
	cfg, err := websocket.NewConfig(u, "https://localhost/")
	if err != nil {
		return nil, err
	}
	cfg.TlsConfig = tlsConfig
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", u, err)
	}
	defer ws.Close()
	lines, err := ReadUntil(ctx, ws, marker)
	if err != nil {
		return lines, fmt.Errorf("console of %s/%s: %w", namespace, name, err)
	}
	return lines, nil
}

// handlerTLS is the client TLS configuration of the node agent's REST API:
// the client certificate and CA bundle the operator created.
func (c *Cluster) handlerTLS(ctx context.Context) (*tls.Config, error) {
	secret, err := c.Kube.CoreV1().Secrets(Namespace).Get(ctx, installstrategy.HandlerClientCertSecretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	bundle, err := c.Kube.CoreV1().ConfigMaps(Namespace).Get(ctx, installstrategy.CABundleConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return installstrategy.HandlerClientTLS(secret.Data, bundle.Data[installstrategy.CABundleKey])
}

// HandlerGet GETs a VMI's subresource from the REST API of the node agent
// of its node (for
// instance "guestosinfo") and returns the status code and body.
func (c *Cluster) HandlerGet(ctx context.Context, namespace, name, subresource string) (int, []byte, error) {
	tlsConfig, err := c.handlerTLS(ctx)
	if err != nil {
		return 0, nil, err
	}
	addr, err := c.vmiHandlerAddress(ctx, namespace, name)
	if err != nil {
		return 0, nil, err
	}
	u := fmt.Sprintf("https://%s/v1/namespaces/%s/virtualmachineinstances/%s/%s", addr, namespace, name, subresource)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// ReadUntil reads a console WebSocket until a whole line holding marker
// arrived, or ctx ends, and returns the console's lines so far.
func ReadUntil(ctx context.Context, ws *websocket.Conn, marker string) ([]string, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = ws.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	var out []byte
	buf := make([]byte, 4096)
	for {
		k, err := ws.Read(buf)
		out = append(out, buf[:k]...)
		if i := bytes.Index(out, []byte(marker)); i >= 0 {
			if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
				return Lines(out[:i+j]), nil
			}
		}
		if err != nil {
			return Lines(out), fmt.Errorf("%w before %s", err, marker)
		}
	}
}

// Lines splits console output into its non-empty lines.
func Lines(b []byte) []string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// PodLogs returns the last lines of the logs of the pods in namespace
// matching selector, for failure messages.
func (c *Cluster) PodLogs(ctx context.Context, namespace, selector string, lines int64) string {
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				fmt.Fprintf(&b, "==> pod %s/%s %s=%s: %s: %s\n", p.Namespace, p.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := st.State.Waiting; w != nil && w.Message != "" {
				fmt.Fprintf(&b, "==> pod %s/%s container %s waiting: %s: %s\n", p.Namespace, p.Name, st.Name, w.Reason, w.Message)
			}
			if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
				fmt.Fprintf(&b, "==> pod %s/%s container %s exited %d: %s: %s\n", p.Namespace, p.Name, st.Name, t.ExitCode, t.Reason, t.Message)
			}
		}
		for _, ctr := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			fmt.Fprintf(&b, "==> pod %s/%s container %s (%s) <==\n", p.Namespace, p.Name, ctr.Name, p.Status.Phase)
			rc, err := c.Kube.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &lines}).Stream(ctx)
			if err != nil {
				fmt.Fprintf(&b, "(%v)\n", err)
				continue
			}
			data, _ := io.ReadAll(rc)
			rc.Close()
			b.Write(data)
		}
	}
	return b.String()
}

// poll calls f every interval until it returns true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, f func() (bool, error)) error {
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
