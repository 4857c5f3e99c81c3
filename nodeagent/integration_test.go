package nodeagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/hypervisor/libvirt"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/localnode"
	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
)

const (
	nodeName    = "node01"
	guestMarker = "GUEST-BOOTED"
	guestImage  = "vmkit/tiny-guest:test"
)

// testNode is one node with real parts: an API server, vmkit's controllers,
// the node agent and real libvirt. The kubelet's part is played by
// localnode: it binds launcher pods to the node, starts virt-launcher as a
// local process with the pod's arguments (its directories mapped to
// temporary ones, as emptyDirs would be), reports the pod Running and ready,
// and reports the pod's end when the process exits.
type testNode struct {
	t      *testing.T
	ns     string
	env    *testenv.Env
	client versioned.Interface
	kube   kubernetes.Interface
	hv     *libvirt.Hypervisor
	local  *localnode.Node
	share  string

	renderer    *podtemplate.Renderer
	managerStop func() // stops vmcontrol's manager; nil while it is stopped

	agentMu     sync.Mutex
	agent       *nodeagent.Agent
	stopAgent   func()
	agentServer *httptest.Server
}

// startNode starts a node whose launchers boot the test guest's files (see
// localnode.GuestFiles).
func startNode(t *testing.T) *testNode {
	t.Helper()
	uri := libvirtenv.RequireLibvirt(t)
	if strings.HasPrefix(uri, "test:") {
		t.Fatalf("%s=%s is libvirt's mock driver, which runs no guest; this test needs QEMU (unset %s)", libvirtenv.LibvirtURIEnv, uri, libvirtenv.LibvirtURIEnv)
	}
	guest := libvirtenv.RequireGuest(t)
	guestDir := filepath.Dir(guest.Kernel)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "vmk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "virt-launcher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/virt-launcher")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building virt-launcher (needs libvirt-dev and pkg-config: make test-deps): %v\n%s", err, out)
	}

	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: all})
	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hv, err := libvirt.New(ctx, libvirt.Options{URI: uri})
	if err != nil {
		t.Fatalf("libvirt at %s: %v (make test-deps)", uri, err)
	}
	n := &testNode{t: t, ns: "na-" + rand.String(6), env: env, client: client, kube: env.Kube, hv: hv}
	t.Cleanup(n.cleanup)
	if _, err := n.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller manager runs: create the ServiceAccount pods need.
	if _, err := n.kube.CoreV1().ServiceAccounts(n.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	renderer, err := podtemplate.New(podtemplate.Config{LauncherImage: "vmkit/virt-launcher:test", EmulationAllowed: true})
	if err != nil {
		t.Fatal(err)
	}
	n.renderer = renderer
	n.startManager()
	t.Cleanup(n.stopManager)
	n.local, err = localnode.Start(ctx, localnode.Options{
		Kube: n.kube, NodeName: nodeName, Namespace: n.ns, LauncherBinary: bin, LibvirtURI: uri,
		GuestDir: guestDir, BaseDir: dir, Domains: hv,
		// Local launchers share the host's libvirt, which may offer a
		// /dev/kvm that does not run guests (these machines): TCG always.
		// Launcher pods choose from the domain capabilities (test/e2e).
		ForceEmulation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.share = n.local.ShareDir()
	n.agentServer = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.agentMu.Lock()
		a := n.agent
		n.agentMu.Unlock()
		a.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(n.agentServer.Close)
	n.startAgent()
	return n
}

// startManager starts vmcontrol's controllers (VM, VMI: the launcher pods).
func (n *testNode) startManager() {
	n.t.Helper()
	m, err := vmcontrol.NewManager(vmcontrol.Options{Config: n.env.Config, Renderer: n.renderer})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	n.managerStop = func() {
		cancel()
		if err := <-done; err != nil {
			n.t.Errorf("vmcontrol manager: %v", err)
		}
	}
}

// stopManager stops vmcontrol's controllers, if they run.
func (n *testNode) stopManager() {
	if n.managerStop != nil {
		n.managerStop()
		n.managerStop = nil
	}
}

// startAgent starts a node agent and points the REST server at it.
func (n *testNode) startAgent() {
	n.t.Helper()
	a, err := nodeagent.New(nodeagent.Config{
		NodeName: nodeName, Client: n.client, Kube: n.kube, ShareDir: n.share,
		// No kubelet: never look at the machine's /var/lib/kubelet/pods,
		// which may hold another cluster's launchers.
		KubeletPodsDir: filepath.Join(n.local.BaseDir(), "kubelet-pods"),
		PollInterval:   500 * time.Millisecond, HeartbeatInterval: 2 * time.Second,
	})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	n.agentMu.Lock()
	n.agent = a
	n.stopAgent = func() {
		cancel()
		if err := <-done; err != nil {
			n.t.Errorf("node agent: %v", err)
		}
	}
	n.agentMu.Unlock()
}

func (n *testNode) restartAgent() {
	n.stopAgentNow()
	n.startAgent()
}

// stopAgentNow stops the node agent; startAgent starts a new one.
func (n *testNode) stopAgentNow() {
	n.agentMu.Lock()
	stop := n.stopAgent
	n.stopAgent = nil
	n.agentMu.Unlock()
	if stop != nil {
		stop()
	}
}

func (n *testNode) cleanup() {
	n.agentMu.Lock()
	if n.stopAgent != nil {
		n.stopAgent()
	}
	n.agentMu.Unlock()
	ctx := context.Background()
	// Domains left by the product are an error: look before the local node
	// removes those of its launchers.
	doms, err := n.hv.List(ctx, "")
	if err != nil {
		n.t.Errorf("cleanup: %v", err)
	}
	for _, d := range doms {
		if d.VMI.Namespace != n.ns {
			continue
		}
		n.t.Errorf("cleanup: domain %s of VMI %s was left behind", d.Name, d.VMI.UID)
	}
	if n.local != nil {
		if err := n.local.Stop(); err != nil {
			n.t.Errorf("local node (kubelet stand-in): %v", err)
		}
	}
	for _, d := range doms {
		if d.VMI.Namespace == n.ns {
			_ = n.hv.Destroy(ctx, d.Name)
			_ = n.hv.Undefine(ctx, d.Name)
		}
	}
	_ = n.hv.Close()
}

// launcherOf returns the launcher process of a VMI, or nil.
func (n *testNode) launcherOf(uid types.UID) *localnode.Launcher {
	return n.local.Launcher(uid)
}

func (n *testNode) launcherLogs() string { return n.local.Logs(30) }

// tinyVMI is a VMI of the test guest without a VM.
func tinyVMI(ns, name string) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tinyVM(ns, name, v1.RunStrategyAlways).Spec.Template.Spec,
	}
}

// tinyVM is a VM of the test guest (kernel boot, idle initramfs), without
// a network.
func tinyVM(ns, name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	grace := int64(2)
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(strategy),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				Spec: v1.VirtualMachineInstanceSpec{
					TerminationGracePeriodSeconds: &grace,
					Domain: v1.DomainSpec{
						Machine: &v1.Machine{Type: "pc"},
						Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
							KernelArgs: "console=ttyS0 panic=-1 quiet mitigations=off cryptomgr.notests tsc=reliable no_timer_check",
							Container: &v1.KernelBootContainer{
								Image:      guestImage,
								KernelPath: "/boot/" + localnode.Kernel,
								InitrdPath: "/boot/" + localnode.IdleInitramfs,
							},
						}},
						Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceMemory: resource.MustParse("128Mi"),
						}},
						// No pod interface: local launchers share the
						// host's network namespace, where the agent
						// refuses to wire one (TestHostNetworkLauncherFails).
						Devices: v1.Devices{AutoattachMemBalloon: v1.BoolPtr(false), AutoattachPodInterface: v1.BoolPtr(false)},
					},
				},
			},
		},
	}
}

// waitVMI polls the VMI until cond holds.
func (n *testNode) waitVMI(name string, timeout time.Duration, what string, cond func(vmi *v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
	n.t.Helper()
	var last *v1.VirtualMachineInstance
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		vmi, err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil
			return cond(nil), nil
		}
		if err != nil {
			return false, nil
		}
		last = vmi
		return cond(vmi), nil
	})
	if err != nil {
		state := "gone"
		if last != nil {
			state = fmt.Sprintf("phase %q reason %q conditions %+v", last.Status.Phase, last.Status.Reason, last.Status.Conditions)
		}
		n.t.Fatalf("VMI %s/%s: waiting %v for %s: %v; VMI %s\n%s", n.ns, name, timeout, what, err, state, n.launcherLogs())
	}
	return last
}

func phaseIs(p v1.VirtualMachineInstancePhase) func(*v1.VirtualMachineInstance) bool {
	return func(vmi *v1.VirtualMachineInstance) bool { return vmi != nil && vmi.Status.Phase == p }
}

// console reads the VMI's serial console through the agent's REST API
// until the marker line.
func (n *testNode) console(name string, timeout time.Duration) (string, error) {
	url := strings.Replace(n.agentServer.URL, "http://", "ws://", 1) +
		fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/console?history=true", n.ns, name)
	ws, err := websocket.Dial(url, "", "http://localhost/")
	if err != nil {
		return "", fmt.Errorf("console of %s: %w", name, err)
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(timeout))
	var out []byte
	buf := make([]byte, 4096)
	for {
		k, err := ws.Read(buf)
		out = append(out, buf[:k]...)
		if i := bytes.Index(out, []byte(guestMarker)); i >= 0 {
			if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
				return strings.TrimSpace(string(out[i : i+j])), nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("console of %s: %w; read so far: %q", name, err, out)
		}
	}
}

func (n *testNode) put(name, action string) error {
	url := n.agentServer.URL + fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/%s", n.ns, name, action)
	req, _ := newRequest("PUT", url)
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("PUT %s: %s: %s", action, resp.Status, b)
	}
	return nil
}

func condition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstanceCondition {
	if vmi == nil {
		return nil
	}
	return vmi.VMICondition(t)
}

// TestNodeLifecycle is the node-level integration test: a VM with
// runStrategy Always becomes a running guest whose console shows its boot;
// pause and unpause show in the Paused condition; the agent's metrics show
// KubeVirt's per-VMI metrics of the guest; a restarted agent leaves
// the guest alone, and stops a guest whose VMI was deleted while it was
// down; a killed launcher fails the VMI and the VM starts a new
// one; halting the VM removes the guest, its launcher, sockets and disks.
func TestNodeLifecycle(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	name := "tiny-" + rand.String(5)

	created := time.Now()
	if _, err := n.client.KubevirtV1().VirtualMachines(n.ns).Create(ctx, tinyVM(n.ns, name, v1.RunStrategyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitVMI(name, 60*time.Second, "Scheduled", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi != nil && (vmi.Status.Phase == v1.Scheduled || vmi.Status.Phase == v1.Running)
	})
	scheduled := time.Since(created)
	vmi := n.waitVMI(name, 60*time.Second, "Running", phaseIs(v1.Running))
	running := time.Since(created)
	line, err := n.console(name, 60*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, n.launcherLogs())
	}
	marker := time.Since(created)
	t.Logf("VM create → VMI Scheduled %v → Running %v → %q on the console %v",
		scheduled.Round(time.Millisecond), running.Round(time.Millisecond), line, marker.Round(time.Millisecond))
	firstUID := vmi.UID

	t.Run("Heartbeat", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			node, err := n.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			return err == nil && node.Labels[v1.NodeSchedulable] == "true" && node.Annotations[v1.VirtHandlerHeartbeat] != "", nil
		})
		if err != nil {
			t.Errorf("node %s: no heartbeat annotation and schedulable=true label: %v", nodeName, err)
		}
	})

	t.Run("PauseUnpause", func(t *testing.T) {
		if err := n.put(name, "pause"); err != nil {
			t.Fatal(err)
		}
		n.waitVMI(name, 10*time.Second, "Paused condition", func(vmi *v1.VirtualMachineInstance) bool {
			c := condition(vmi, v1.VirtualMachineInstancePaused)
			return c != nil && c.Status == corev1.ConditionTrue && c.Reason == nodeagent.ReasonPausedByUser
		})
		if err := n.put(name, "unpause"); err != nil {
			t.Fatal(err)
		}
		n.waitVMI(name, 10*time.Second, "no Paused condition", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi != nil && condition(vmi, v1.VirtualMachineInstancePaused) == nil && vmi.Status.Phase == v1.Running
		})
		if err := n.put(name, "unpause"); err == nil || !strings.Contains(err.Error(), "409") {
			t.Errorf("unpausing a running guest: %v, want 409", err)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		// KubeVirt's per-VMI metrics from the running guest's domain
		// statistics, as a scrape of virt-handler's /metrics sees them.
		n.agentMu.Lock()
		a := n.agent
		n.agentMu.Unlock()
		scrape := func() map[string]float64 {
			t.Helper()
			mfs, err := a.Registry().Gather()
			if err != nil {
				t.Fatalf("Gather: %v", err)
			}
			out := map[string]float64{}
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					l := map[string]string{}
					for _, lp := range m.GetLabel() {
						l[lp.GetName()] = lp.GetValue()
					}
					if l["name"] != name || l["namespace"] != n.ns || l["node"] != nodeName {
						continue
					}
					key := mf.GetName()
					if id, ok := l["id"]; ok {
						key += "{id=" + id + ",state=" + l["state"] + "}"
					}
					out[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
			return out
		}
		first := scrape()
		time.Sleep(time.Second)
		second := scrape()
		t.Logf("kubevirt_vmi_* of %s/%s: %v", n.ns, name, second)
		for _, k := range []string{"kubevirt_vmi_cpu_usage_seconds_total", "kubevirt_vmi_vcpu_seconds_total{id=0,state=running}",
			"kubevirt_vmi_memory_resident_bytes", "kubevirt_vmi_memory_actual_balloon_bytes"} {
			if second[k] <= 0 {
				t.Errorf("%s of the running guest = %v, want > 0", k, second[k])
			}
		}
		if got := second["kubevirt_vmi_memory_domain_bytes"]; got != 128<<20 {
			t.Errorf("kubevirt_vmi_memory_domain_bytes = %v, want the guest's 128 MiB", got)
		}
		if second["kubevirt_vmi_cpu_usage_seconds_total"] < first["kubevirt_vmi_cpu_usage_seconds_total"] {
			t.Errorf("kubevirt_vmi_cpu_usage_seconds_total went down: %v then %v", first["kubevirt_vmi_cpu_usage_seconds_total"], second["kubevirt_vmi_cpu_usage_seconds_total"])
		}
	})

	t.Run("GuestAgentNotConnected", func(t *testing.T) {
		resp, err := httpClient.Get(n.agentServer.URL + fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/guestosinfo", n.ns, name))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 409 {
			t.Errorf("guestosinfo: %s, want 409 Conflict", resp.Status)
		}
	})

	t.Run("AgentRestartLeavesGuestAlone", func(t *testing.T) {
		p := n.launcherOf(firstUID)
		n.restartAgent()
		time.Sleep(3 * time.Second) // several poll intervals of the new agent
		vmi := n.waitVMI(name, 5*time.Second, "Running", phaseIs(v1.Running))
		if vmi.UID != firstUID {
			t.Fatalf("VMI replaced after the agent restarted: UID %s, was %s", vmi.UID, firstUID)
		}
		if p.Exited() {
			t.Fatalf("launcher exited after the agent restarted\n%s", n.launcherLogs())
		}
		st, err := client.New(client.SocketPath(n.share, string(firstUID))).State(ctx)
		if err != nil || st.State != hypervisor.StateRunning {
			t.Fatalf("domain after the agent restarted: %+v, %v; want Running", st, err)
		}
		if _, err := n.console(name, 10*time.Second); err != nil {
			t.Errorf("console after the agent restarted: %v", err)
		}
	})

	t.Run("OrphanLauncherStopped", func(t *testing.T) {
		// A VMI deleted while the agent is down, its pod left behind
		// (vmcontrol stopped too, so nobody deletes the pod and the
		// kubelet stand-in never sends SIGTERM): its guest keeps running.
		orphan := "orphan-" + rand.String(5)
		if _, err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Create(ctx, tinyVMI(n.ns, orphan), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		vmi := n.waitVMI(orphan, 60*time.Second, "Running", phaseIs(v1.Running))
		p := n.launcherOf(vmi.UID)
		if p == nil {
			t.Fatalf("no launcher for the running VMI %s", vmi.UID)
		}
		n.stopAgentNow()
		n.stopManager()
		if err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Delete(ctx, orphan, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// vmcontrol's finalizer would wait for the pod to go: remove it.
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Patch(ctx, orphan, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		n.waitVMI(orphan, 10*time.Second, "VMI gone", func(vmi *v1.VirtualMachineInstance) bool { return vmi == nil })
		if doms, err := n.hv.List(ctx, string(vmi.UID)); err != nil || len(doms) != 1 || p.Exited() {
			t.Fatalf("before the agent starts: domains %+v (%v), launcher exited %v; want the orphan guest running", doms, err, p.Exited())
		}

		n.startAgent()
		started := time.Now()
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
			t.Fatalf("the orphan launcher still runs 60s after the agent started\n%s", n.launcherLogs())
		}
		t.Logf("agent started → orphan launcher exited in %v", time.Since(started).Round(time.Millisecond))
		if code := p.ExitCode(); code != 0 {
			t.Errorf("orphan launcher exit code %d, want 0\n%s", code, n.launcherLogs())
		}
		if doms, err := n.hv.List(ctx, string(vmi.UID)); err != nil || len(doms) != 0 {
			t.Errorf("domains of the orphan VMI: %+v, %v; want none", doms, err)
		}
		waitGone(t, client.SocketDir(n.share, string(vmi.UID)), 10*time.Second)
		for _, d := range []string{"eph", "priv"} {
			if left := listFiles(filepath.Join(p.PodDir, d)); len(left) > 0 {
				t.Errorf("the orphan launcher left files in its %s directory: %v", d, left)
			}
		}
		n.agentMu.Lock()
		a := n.agent
		n.agentMu.Unlock()
		if got := nodeagent.CounterValue(t, a, "vmkit_nodeagent_orphan_launchers_total"); got != 1 {
			t.Errorf("vmkit_nodeagent_orphan_launchers_total = %v, want 1", got)
		}

		// The same start left the VM's running guest alone.
		n.startManager()
		if live := n.launcherOf(firstUID); live == nil || live.Exited() {
			t.Fatalf("the launcher of the VM's VMI %s exited when the agent found the orphan\n%s", firstUID, n.launcherLogs())
		}
		st, err := client.New(client.SocketPath(n.share, string(firstUID))).State(ctx)
		if err != nil || st.State != hypervisor.StateRunning || st.StopRequested {
			t.Fatalf("the VM's domain after the orphan was stopped: %+v, %v; want Running", st, err)
		}
		if vmi := n.waitVMI(name, 5*time.Second, "Running", phaseIs(v1.Running)); vmi.UID != firstUID {
			t.Fatalf("VMI replaced: UID %s, was %s", vmi.UID, firstUID)
		}
	})

	t.Run("LauncherKilled", func(t *testing.T) {
		p := n.launcherOf(firstUID)
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		failed := n.waitVMI(name, 30*time.Second, "Failed or replaced", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi == nil || vmi.UID != firstUID || vmi.Status.Phase == v1.Failed
		})
		if failed != nil && failed.UID == firstUID {
			if failed.Status.Reason == "" {
				t.Errorf("VMI Failed without a reason")
			}
			t.Logf("killed launcher: VMI Failed, reason %s", failed.Status.Reason)
		}
		restarted := time.Now()
		vmi := n.waitVMI(name, 90*time.Second, "a new VMI Running", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi != nil && vmi.UID != firstUID && vmi.Status.Phase == v1.Running
		})
		t.Logf("runStrategy Always: new VMI %s Running %v after the kill", vmi.UID, time.Since(restarted).Round(time.Millisecond))
		if _, err := n.console(name, 60*time.Second); err != nil {
			t.Errorf("console of the new VMI: %v", err)
		}
		waitGone(t, client.SocketDir(n.share, string(firstUID)), 10*time.Second)
	})

	t.Run("HaltRemovesEverything", func(t *testing.T) {
		vmi, err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := n.launcherOf(vmi.UID)
		patch := []byte(`{"spec":{"runStrategy":"Halted"}}`)
		if _, err := n.client.KubevirtV1().VirtualMachines(n.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		halted := time.Now()
		n.waitVMI(name, 60*time.Second, "VMI gone", func(vmi *v1.VirtualMachineInstance) bool { return vmi == nil })
		t.Logf("Halted → VMI gone in %v", time.Since(halted).Round(time.Millisecond))
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("launcher still running after the VMI is gone\n%s", n.launcherLogs())
		}
		if code := p.ExitCode(); code != 0 {
			t.Errorf("launcher exit code %d, want 0\n%s", code, n.launcherLogs())
		}
		doms, err := n.hv.List(ctx, string(vmi.UID))
		if err != nil || len(doms) != 0 {
			t.Errorf("domains of the halted VMI: %+v, %v; want none", doms, err)
		}
		waitGone(t, client.SocketDir(n.share, string(vmi.UID)), 10*time.Second)
		for _, d := range []string{"eph", "priv"} {
			if left := listFiles(filepath.Join(p.PodDir, d)); len(left) > 0 {
				var st []string
				for _, f := range left {
					if fi, err := os.Lstat(f); err == nil {
						st = append(st, fmt.Sprintf("%s mode %v mtime %s", f, fi.Mode(), fi.ModTime().Format("15:04:05.000")))
					}
				}
				t.Errorf("the launcher left files in its %s directory: %v (now %s)\n%s\n%s", d, left, time.Now().Format("15:04:05.000"), strings.Join(st, "\n"), n.launcherLogs())
			}
		}
	})
}

// TestGuestAgent boots the test guest with Debian's qemu-ga
// (localnode.AgentInitramfs from hack/make-guest.sh): the VMI gets
// AgentConnected, guestOSInfo from the guest's os-release and kernel, and
// the REST API answers guestosinfo, userlist and filesystemlist, freezes
// and thaws the guest's file systems and soft-reboots it through the agent,
// and resets it.
func TestGuestAgent(t *testing.T) {
	initrd := filepath.Join(filepath.Dir(libvirtenv.RequireGuest(t).Kernel), localnode.AgentInitramfs)
	if fi, err := os.Stat(initrd); err != nil || fi.Size() == 0 {
		t.Fatalf("test guest file %s missing (%v); build it with: hack/make-guest.sh (as root)", initrd, err)
	}
	n := startNode(t)
	ctx := context.Background()
	name := "agent-" + rand.String(5)

	vm := tinyVM(n.ns, name, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Firmware.KernelBoot.Container.InitrdPath = "/boot/" + localnode.AgentInitramfs
	created := time.Now()
	if _, err := n.client.KubevirtV1().VirtualMachines(n.ns).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitVMI(name, 60*time.Second, "Running", phaseIs(v1.Running))
	running := time.Since(created)
	vmi := n.waitVMI(name, 90*time.Second, "AgentConnected", func(vmi *v1.VirtualMachineInstance) bool {
		c := condition(vmi, v1.VirtualMachineInstanceAgentConnected)
		return c != nil && c.Status == corev1.ConditionTrue
	})
	connected := time.Since(created)
	t.Logf("VM create → VMI Running %v → AgentConnected %v (%v after Running)",
		running.Round(time.Millisecond), connected.Round(time.Millisecond), (connected - running).Round(time.Millisecond))
	if vmi.Status.GuestOSInfo.Name == "" {
		vmi = n.waitVMI(name, 30*time.Second, "guestOSInfo", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi != nil && vmi.Status.GuestOSInfo.Name != ""
		})
	}
	if os := vmi.Status.GuestOSInfo; os.Name != "vmkit test guest" || os.ID != "vmkit-test-guest" || !strings.HasPrefix(os.KernelRelease, "6.") || os.Machine != "x86_64" {
		t.Errorf("guestOSInfo %+v, want the test guest's os-release and Debian kernel", os)
	}
	for _, iface := range vmi.Status.Interfaces {
		if iface.InfoSource != nodeagent.InfoSourceGuestAgent || iface.InterfaceName == "" || iface.InterfaceName == "lo" {
			t.Errorf("status interface %+v, want a guest interface reported by the guest agent", iface)
		}
	}
	t.Logf("status.interfaces: %+v", vmi.Status.Interfaces)

	get := func(query string, into any) {
		t.Helper()
		url := n.agentServer.URL + fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/%s", n.ns, name, query)
		resp, err := httpClient.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", query, resp.Status, body)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v: %s", query, err, body)
		}
		t.Logf("GET %s: %s", query, bytes.TrimSpace(body))
	}
	var info v1.VirtualMachineInstanceGuestAgentInfo
	get("guestosinfo", &info)
	if info.GAVersion == "" || info.Hostname != "vmkit-guest" || info.OS.Name != "vmkit test guest" || info.Timezone != "UTC, 0" || len(info.SupportedCommands) == 0 {
		t.Errorf("guestosinfo %+v, want the guest agent's version, the guest's host name, OS and time zone", info)
	}
	var users v1.VirtualMachineInstanceGuestOSUserList
	get("userlist", &users)
	if users.Items == nil || len(users.Items) != 0 {
		t.Errorf("userlist %+v, want an empty list (nobody logs in to the test guest)", users)
	}
	var fs v1.VirtualMachineInstanceFileSystemList
	get("filesystemlist", &fs)
	if fs.Items == nil {
		t.Errorf("filesystemlist %+v, want a list", fs)
	}

	t.Run("FreezeUnfreeze", func(t *testing.T) { n.testFreeze(t, name) })
	t.Run("SoftReboot", func(t *testing.T) { n.testSoftReboot(t, name) })
	t.Run("Reset", func(t *testing.T) { n.testReset(t, name) })

	patch := []byte(`{"spec":{"runStrategy":"Halted"}}`)
	if _, err := n.client.KubevirtV1().VirtualMachines(n.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p := n.launcherOf(vmi.UID)
	n.waitVMI(name, 60*time.Second, "VMI gone", func(vmi *v1.VirtualMachineInstance) bool { return vmi == nil })
	if p != nil {
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("launcher still running after the VMI is gone\n%s", n.launcherLogs())
		}
	}
}

func waitGone(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return errors.Is(err, os.ErrNotExist), nil
	})
	if err != nil {
		t.Errorf("%s still exists: %v", path, err)
	}
}

func listFiles(dir string) []string {
	var out []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}
