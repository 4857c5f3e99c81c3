// Package e2e runs vmkit end to end on a real single-node cluster
// (internal/cluster): kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd and a kubelet, with vmkit installed by its
// operator from images imported into containerd, and the tiny guest booting
// under QEMU inside its launcher pod. Nothing plays the kubelet's part.
//
// One cluster serves the whole package (TestMain); the tests run in file
// order and each leaves the cluster as it found it, except TestUninstall,
// which runs last.
package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const guestMarker = "GUEST-BOOTED"

// suite is the package's cluster, which TestMain starts.
var suite framework.Suite

// starts records every VMI start of the suite, for TestStartTimes.
var starts *framework.Starts

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		opts, err := cluster.NodeOptions(cluster.Options{})
		if err != nil {
			suite.Set(nil, err)
			return m.Run()
		}
		env, err := testenv.Launch(ctx, opts)
		if err != nil {
			suite.Set(nil, fmt.Errorf("starting the cluster: %w", err))
			return m.Run()
		}
		defer func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: stopping the cluster:", err)
			}
		}()
		c, err := cluster.New(env, cluster.Options{})
		if err == nil {
			began := time.Now()
			if err = c.Install(ctx, cluster.StorageOptions{}); err == nil {
				accel := "on KVM"
				if ok, why := cluster.KVM(); !ok {
					accel = "under TCG (" + why + ")"
				}
				fmt.Printf("e2e: cluster up, vmkit installed by the operator in %v; guests run %s\n", time.Since(began).Round(time.Millisecond), accel)
				starts = framework.WatchStarts(c)
			}
		}
		suite.Set(c, err)
		return m.Run()
	}()
	os.Exit(code)
}

// tinyVM reads examples/vm-tiny.yaml with the given name and run strategy.
func tinyVM(t testing.TB, name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	t.Helper()
	return framework.ExampleVM(t, "vm-tiny.yaml", name, strategy)
}

func running(vmi *v1.VirtualMachineInstance) bool { return vmi.Status.Phase == v1.Running }

// waitNoVMI waits until the VMI of name is gone.
func waitNoVMI(t testing.TB, c *cluster.Cluster, name string) {
	t.Helper()
	suite.WaitFor(t, "VMI default/"+name+" gone", 2*time.Minute, func() (bool, string) {
		vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, "phase " + string(vmi.Status.Phase)
	})
}

// console reads the VMI's console until the guest's marker.
func console(t testing.TB, c *cluster.Cluster, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	lines, err := c.Console(ctx, "default", name, guestMarker)
	if err != nil {
		t.Fatalf("%v (console so far: %q)\n%s", err, lines, framework.ComponentLogs(c))
	}
}

// launcherPod returns the one launcher pod of a VMI.
func launcherPod(t testing.TB, c *cluster.Cluster, vmi *v1.VirtualMachineInstance) corev1.Pod {
	t.Helper()
	pods, err := c.Kube.CoreV1().Pods(vmi.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("launcher pods of VMI %s: %d (err %v)", vmi.UID, len(pods.Items), err)
	}
	return pods.Items[0]
}

func setRunStrategy(t testing.TB, c *cluster.Cluster, name string, s v1.VirtualMachineRunStrategy) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"runStrategy":%q}}`, s)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestVMBoots: VM → VMI Running in a launcher pod on the kubelet → the
// guest's marker on the console through the node agent.
func TestVMBoots(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-boot", v1.RunStrategyAlways)
	began := time.Now()
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	toRunning := time.Since(began)
	console(t, c, vm.Name)
	t.Logf("VM create → VMI Running %v, → %s on the console %v (node %s)", toRunning.Round(time.Millisecond), guestMarker,
		time.Since(began).Round(time.Millisecond), vmi.Status.NodeName)
	pod := launcherPod(t, c, vmi)
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("launcher pod %s is %s", pod.Name, pod.Status.Phase)
	}
	logTimeline(t, vm, vmi, &pod)
	logMemory(t, c, vmi, &pod)
	suite.WaitFor(t, "VM Ready", time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.Ready && got.Status.PrintableStatus == v1.VirtualMachineStatusRunning, string(got.Status.PrintableStatus)
	})
}

// TestStopStartRestart: Halted stops the guest and removes VMI and pod;
// Always starts it again; deleting the VMI restarts it as a new one.
func TestStopStartRestart(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-cycle", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	first := framework.WaitVMI(t, c, vm.Name, "Running", running)
	pod := launcherPod(t, c, first)

	setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, vm.Name)
	suite.WaitFor(t, "launcher pod "+pod.Name+" gone", 2*time.Minute, func() (bool, string) {
		_, err := c.Kube.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	setRunStrategy(t, c, vm.Name, v1.RunStrategyAlways)
	second := framework.WaitVMI(t, c, vm.Name, "Running again", running)
	if second.UID == first.UID {
		t.Fatalf("start after stop reused VMI %s", first.UID)
	}
	console(t, c, vm.Name)

	// Restart: the VMI goes, the VM brings up a new one.
	if err := c.Client.KubevirtV1().VirtualMachineInstances("default").Delete(t.Context(), vm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	third := framework.WaitVMI(t, c, vm.Name, "Running after restart", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.UID != second.UID && running(vmi)
	})
	t.Logf("VMIs %s → %s → %s", first.UID, second.UID, third.UID)
}

// TestRerunOnFailure: QEMU killed → VMI Failed → a new VMI runs.
func TestRerunOnFailure(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-rerun", v1.RunStrategyRerunOnFailure)
	framework.CreateVM(t, c, vm)
	first := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	pid := qemuPID(t, "default", vm.Name)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing QEMU (pid %d): %v", pid, err)
	}
	var failedAfter time.Duration
	second := framework.WaitVMI(t, c, vm.Name, "replaced by a running one", func(vmi *v1.VirtualMachineInstance) bool {
		if vmi.UID == first.UID && vmi.Status.Phase == v1.Failed && failedAfter == 0 {
			failedAfter = time.Since(killed)
		}
		return vmi.UID != first.UID && running(vmi)
	})
	t.Logf("QEMU pid %d killed: VMI %s Failed after %v (0: not seen), replaced by %s Running after %v",
		pid, first.UID, failedAfter.Round(time.Millisecond), second.UID, time.Since(killed).Round(time.Millisecond))
	events, err := c.Kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + vm.Name})
	if err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
}

// qemuPID finds the QEMU process of a VMI's domain (<namespace>_<name>).
func qemuPID(t testing.TB, namespace, name string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if !strings.Contains(filepath.Base(args[0]), "qemu-system") {
			continue
		}
		for _, a := range args {
			// -name guest=<namespace>_<name>,debug-threads=on: the whole
			// name, not a prefix (vm-net is a prefix of vm-net-bridge).
			if opt, _, _ := strings.Cut(a, ","); opt == "guest="+namespace+"_"+name {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				return pid
			}
		}
	}
	t.Fatalf("no QEMU process for %s/%s", namespace, name)
	return 0
}

// TestDeleteVM: deleting the VM removes its VMI and launcher pod.
func TestDeleteVM(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-delete", v1.RunStrategyAlways)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Create(t.Context(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	pod := launcherPod(t, c, vmi)
	if err := c.Client.KubevirtV1().VirtualMachines("default").Delete(t.Context(), vm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoVMI(t, c, vm.Name)
	suite.WaitFor(t, "launcher pod "+pod.Name+" gone", 2*time.Minute, func() (bool, string) {
		_, err := c.Kube.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestGuestAgentAndConfigDisk: a guest with a real QEMU guest agent and a
// ConfigMap disk, in a launcher pod on the kubelet: the pod mounts the
// ConfigMap, the launcher turns it into an ISO the domain attaches, the
// guest agent's channel reaches the node agent, which reports
// AgentConnected and the guest's OS and serves guestosinfo.
func TestGuestAgentAndConfigDisk(t *testing.T) {
	c := suite.Need(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vm-agent-cfg", Namespace: "default"},
		Data: map[string]string{"greeting": "hello from a ConfigMap"}}
	if _, err := c.Kube.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	vm := tinyVM(t, "vm-agent", v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Firmware.KernelBoot.Container.InitrdPath = "/boot/initramfs-agent.cpio.gz"
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{
		ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}})
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: "cfg",
		DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	began := time.Now()
	framework.CreateVM(t, c, vm)
	framework.WaitVMI(t, c, vm.Name, "Running", running)
	toRunning := time.Since(began)
	vmi := framework.WaitVMI(t, c, vm.Name, "AgentConnected with the guest's OS", func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceAgentConnected)
		return cond != nil && cond.Status == corev1.ConditionTrue && vmi.Status.GuestOSInfo.ID != ""
	})
	t.Logf("VM create → Running %v, → AgentConnected %v; guest OS %q", toRunning.Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond), vmi.Status.GuestOSInfo.PrettyName)
	if got := vmi.Status.GuestOSInfo.ID; got != "vmkit-test-guest" {
		t.Errorf("guestOSInfo.id %q, want vmkit-test-guest (from the guest's /etc/os-release)", got)
	}
	pod := launcherPod(t, c, vmi)
	var mounted bool
	for _, v := range pod.Spec.Volumes {
		mounted = mounted || (v.ConfigMap != nil && v.ConfigMap.Name == cm.Name)
	}
	if !mounted {
		t.Errorf("launcher pod %s does not mount ConfigMap %s", pod.Name, cm.Name)
	}
	code, body, err := c.HandlerGet(t.Context(), "default", vm.Name, "guestosinfo")
	if err != nil {
		t.Fatal(err)
	}
	var info v1.VirtualMachineInstanceGuestAgentInfo
	if code != http.StatusOK || json.Unmarshal(body, &info) != nil || info.OS.ID != "vmkit-test-guest" || info.GAVersion == "" {
		t.Errorf("GET guestosinfo: %d %s", code, body)
	}
}

// TestComponentsOnPodNetwork: vmkit's components run as ordinary pods on
// the pod network and reach kube-apiserver through the kubernetes Service;
// virt-handler keeps the host's PID namespace.
func TestComponentsOnPodNetwork(t *testing.T) {
	c := suite.Need(t)
	_, podNet, _ := net.ParseCIDR(testenv.PodCIDR)
	pods, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		app := p.Labels[v1.AppLabel]
		seen[app] = true
		if p.Spec.HostNetwork || !podNet.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Errorf("pod %s (%s): hostNetwork %v, IP %q; want a pod on the pod network %s", p.Name, app, p.Spec.HostNetwork, p.Status.PodIP, testenv.PodCIDR)
		}
		for _, ctr := range p.Spec.Containers {
			for _, env := range ctr.Env {
				if env.Name == "KUBERNETES_SERVICE_HOST" {
					t.Errorf("pod %s container %s overrides KUBERNETES_SERVICE_HOST=%s", p.Name, ctr.Name, env.Value)
				}
			}
		}
		if app == v1.VirtHandlerValue && !p.Spec.HostPID {
			t.Errorf("virt-handler pod %s without hostPID", p.Name)
		}
	}
	for _, app := range []string{v1.VirtOperatorValue, v1.VirtControllerValue, v1.VirtHandlerValue} {
		if !seen[app] {
			t.Errorf("no %s pod in namespace %s", app, cluster.Namespace)
		}
	}
}

// TestPodNetwork boots three guests of examples/vm-net.yaml on the pod
// network at once: vm-net as the example is (masquerade), vm-net-ports with
// masquerade forwarding only port 80 (and two vCPUs with a multi-queue NIC),
// and vm-net-bridge with the bridge binding. Each VMI reports its pod's IP in status.interfaces and its guest
// answers HTTP on that IP; a ClusterIP Service selecting a launcher pod (what
// `virtctl expose` creates) reaches the guest; only the listed ports are
// forwarded; a masquerade guest reaches a server in another pod (egress
// through NAT, seen there as coming from its pod's IP) and sees inbound
// connections from their real source, except the pod's own localhost, which
// it sees as the gateway 10.0.2.1, as on KubeVirt.
func TestPodNetwork(t *testing.T) {
	c := suite.Need(t)
	masq := framework.ExampleVM(t, "vm-net.yaml", "vm-net", v1.RunStrategyAlways)
	ports := framework.ExampleVM(t, "vm-net.yaml", "vm-net-ports", v1.RunStrategyAlways)
	ports.Spec.Template.Spec.Domain.Devices.Interfaces[0].Ports = []v1.Port{{Port: 80}}
	// Two vCPUs and a multi-queue virtio NIC: libvirt opens the tap twice.
	ports.Spec.Template.Spec.Domain.CPU = &v1.CPU{Cores: 2}
	ports.Spec.Template.Spec.Domain.Devices.NetworkInterfaceMultiQueue = v1.BoolPtr(true)
	// And an ACPI index (#39 item 5), which the guest names its NIC by.
	ports.Spec.Template.Spec.Domain.Devices.Interfaces[0].ACPIIndex = 3
	bridge := framework.ExampleVM(t, "vm-net.yaml", "vm-net-bridge", v1.RunStrategyAlways)
	bridge.Spec.Template.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}

	began := time.Now()
	vms := []*v1.VirtualMachine{masq, ports, bridge}
	for _, vm := range vms {
		framework.CreateVM(t, c, vm)
	}
	podIP := map[string]string{}
	for _, vm := range vms {
		framework.WaitVMI(t, c, vm.Name, "Running", running)
		toRunning := time.Since(began)
		vmi := framework.WaitVMI(t, c, vm.Name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
			return len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
		})
		iface := vmi.Status.Interfaces[0]
		pod := launcherPod(t, c, vmi)
		if pod.Spec.HostNetwork {
			t.Fatalf("launcher pod %s is on the host network", pod.Name)
		}
		if iface.Name != "default" || iface.IP != pod.Status.PodIP || !strings.HasPrefix(iface.InfoSource, "domain") {
			t.Errorf("VMI %s: status.interfaces[0] = %+v, want interface default with the launcher pod's IP %s from the domain", vm.Name, iface, pod.Status.PodIP)
		}
		_, podNet, _ := net.ParseCIDR(testenv.PodCIDR)
		if !podNet.Contains(net.ParseIP(pod.Status.PodIP)) {
			t.Errorf("launcher pod IP %s is not on the pod network %s", pod.Status.PodIP, testenv.PodCIDR)
		}
		podIP[vm.Name] = pod.Status.PodIP
		body := suite.HTTPGetUntil(t, framework.GuestURL(podIP[vm.Name], 80, "/"), "vmkit guest "+vm.Name, 90*time.Second)
		t.Logf("%s: create → Running %v → guest answers HTTP on the pod IP %v: %q", vm.Name, toRunning.Round(time.Millisecond),
			time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))
	}

	t.Run("Service", func(t *testing.T) {
		for _, vm := range []*v1.VirtualMachine{masq, bridge} {
			ip := expose(t, c, vm.Name, 8000, 80)
			suite.HTTPGetUntil(t, framework.GuestURL(ip, 8000, "/"), "vmkit guest "+vm.Name, 60*time.Second)
		}
	})
	t.Run("ACPIIndex", func(t *testing.T) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemuPID(t, "default", ports.Name)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"acpi-index":3`) {
			t.Errorf("%s: QEMU's NIC has no acpi-index 3: %s", ports.Name, strings.ReplaceAll(string(data), "\x00", " "))
		}
	})
	t.Run("Ports", func(t *testing.T) {
		suite.HTTPGetUntil(t, framework.GuestURL(podIP[masq.Name], 8080, "/"), "vmkit guest "+masq.Name, 30*time.Second)
		// The guest listens on 8080 (as vm-net's does), but only 80 is forwarded.
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(podIP[ports.Name], "8080"), 3*time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("%s: port 8080 reached with ports: [{port: 80}]", ports.Name)
		}
	})
	t.Run("InboundSource", func(t *testing.T) {
		// A failure here once was 30 s of an unanswered pod IP (the bridge
		// guest's): then log what the host and each pod see of the path.
		pids := map[string]int{masq.Name: qemuPID(t, "default", masq.Name), bridge.Name: qemuPID(t, "default", bridge.Name)}
		defer func() {
			if t.Failed() {
				t.Log(podNetworkState(podIP, pids))
			}
		}()
		// Both bindings show the guest the real client (here the host, on
		// the pod bridge); masquerade NATs only what comes from the pod's
		// own localhost to the gateway 10.0.2.1, as KubeVirt does.
		for _, vm := range []*v1.VirtualMachine{masq, bridge} {
			suite.HTTPGetUntil(t, framework.GuestURL(podIP[vm.Name], 80, "/cgi-bin/client"), "client "+testenv.PodGateway+"\n", 30*time.Second)
		}
		netns := fmt.Sprintf("--net=/proc/%d/ns/net", qemuPID(t, "default", masq.Name))
		out, err := exec.CommandContext(t.Context(), "nsenter", netns, "busybox", "wget", "-q", "-O", "-", "http://127.0.0.1/cgi-bin/client").CombinedOutput()
		if err != nil || string(out) != "client 10.0.2.1\n" {
			t.Errorf("GET http://127.0.0.1/cgi-bin/client in the launcher pod of %s: %v: %q, want the guest to see 10.0.2.1", masq.Name, err, out)
		}
	})
	t.Run("ClusterDNS", func(t *testing.T) {
		// The guest gets the cluster's name server and search domains by
		// DHCP (from its pod's resolv.conf, as KubeVirt's) and resolves a
		// Service by name (#39 item 1).
		expose(t, c, masq.Name, 80, 80)
		url := "http://" + masq.Name + "-http.default.svc." + testenv.ClusterDomain + "/"
		suite.HTTPGetUntil(t, framework.GuestURL(podIP[bridge.Name], 80, "/cgi-bin/fetch?"+url), "vmkit guest "+masq.Name, 60*time.Second)
		events, err := c.Kube.CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=MissingClusterDNS"})
		if err != nil {
			t.Fatal(err)
		}
		if len(events.Items) > 0 {
			t.Errorf("%d MissingClusterDNS events, e.g. %s", len(events.Items), events.Items[0].Message)
		}
	})
	t.Run("Egress", func(t *testing.T) {
		// The masquerade guest fetches from the bridge guest, in another
		// pod: it leaves through NAT with its pod's IP.
		target := framework.GuestURL(podIP[bridge.Name], 80, "/cgi-bin/client")
		suite.HTTPGetUntil(t, framework.GuestURL(podIP[masq.Name], 80, "/cgi-bin/fetch?"+target), "client "+podIP[masq.Name]+"\n", 60*time.Second)
		// And the other way, from the bridge guest to the masquerade guest.
		suite.HTTPGetUntil(t, framework.GuestURL(podIP[bridge.Name], 80, "/cgi-bin/fetch?"+framework.GuestURL(podIP[masq.Name], 80, "/")), "vmkit guest "+masq.Name, 60*time.Second)
	})
}

// podNetworkState is what the host and the launcher pods (by their QEMU's
// network namespace) see of the pod network: routes and neighbours of the
// pod IPs, and each pod's addresses, neighbours and bridge forwarding table.
func podNetworkState(podIPs map[string]string, pids map[string]int) string {
	var b strings.Builder
	run := func(title string, args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "--- %s: %s (%v)\n%s", title, strings.Join(args, " "), err, out)
	}
	for name, ip := range podIPs {
		run("host, "+name, "ip", "route", "get", ip)
		run("host, "+name, "ip", "neigh", "show", ip)
	}
	for name, pid := range pids {
		netns := fmt.Sprintf("--net=/proc/%d/ns/net", pid)
		run("pod of "+name, "nsenter", netns, "ip", "-br", "addr")
		run("pod of "+name, "nsenter", netns, "ip", "neigh")
		run("pod of "+name, "nsenter", netns, "bridge", "fdb", "show")
	}
	return b.String()
}

// expose creates a ClusterIP Service selecting the launcher pod of VM name
// (port to targetPort), deleted when the test ends, and returns its IP.
func expose(t testing.TB, c *cluster.Cluster, name string, port, targetPort int32) string {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-http", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"kubevirt.io/vm": name},
			Ports:    []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(targetPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	created, err := c.Kube.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
	})
	return created.Spec.ClusterIP
}

// TestContainerDiskBoot boots examples/vm-disk.yaml (no kernelBoot, a
// containerDisk whose image holds the test guest's disk under /disk) and
// examples/vm-efi.yaml three times at once: with BIOS as vm-disk.yaml is
// (SeaBIOS, then SYSLINUX on the serial console), and with UEFI as
// vm-efi.yaml is (secure boot) and with secure boot off (OVMF, Debian's
// signed shim and GRUB, which greets on the serial console). Each guest
// answers HTTP on its pod IP. The BIOS guest names its image's path in the
// container disk and has an emptyDisk, which it writes and reads back.
func TestContainerDiskBoot(t *testing.T) {
	c := suite.Need(t)
	bios := framework.ExampleVM(t, "vm-disk.yaml", "vm-disk", v1.RunStrategyAlways)
	if fw := bios.Spec.Template.Spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil {
		t.Fatal("examples/vm-disk.yaml must boot from its disk, not kernelBoot")
	}
	// The BIOS guest also names its image's path in the container disk
	// and gets an empty 16Mi scratch disk, its /dev/vdb.
	biosSpec := &bios.Spec.Template.Spec
	volumeNamed(t, biosSpec, "rootdisk").ContainerDisk.Path = "/disk/tiny.img"
	biosSpec.Domain.Devices.Disks = append(biosSpec.Domain.Devices.Disks, v1.Disk{Name: "scratch",
		DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	biosSpec.Volumes = append(biosSpec.Volumes, v1.Volume{Name: "scratch",
		VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("16Mi")}}})
	secure := framework.ExampleVM(t, "vm-efi.yaml", "vm-disk-secure", v1.RunStrategyAlways)
	if fw := secure.Spec.Template.Spec.Domain.Firmware; fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil ||
		fw.Bootloader.EFI.SecureBoot == nil || !*fw.Bootloader.EFI.SecureBoot {
		t.Fatal("examples/vm-efi.yaml must boot with UEFI and secure boot")
	}
	insecure := framework.ExampleVM(t, "vm-efi.yaml", "vm-disk-efi", v1.RunStrategyAlways)
	insecure.Spec.Template.Spec.Domain.Firmware.Bootloader.EFI.SecureBoot = v1.BoolPtr(false)
	insecure.Spec.Template.Spec.Domain.Features = nil
	vms := []struct {
		vm     *v1.VirtualMachine
		banner string // what the boot loader prints on the serial console
	}{{bios, "SYSLINUX"}, {insecure, "Welcome to GRUB"}, {secure, "Welcome to GRUB"}}
	began := time.Now()
	for _, v := range vms {
		framework.CreateVM(t, c, v.vm)
	}
	for _, v := range vms {
		name := v.vm.Name
		framework.WaitVMI(t, c, name, "Running", running)
		vmi := framework.WaitVMI(t, c, name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
			return len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
		})
		body := suite.HTTPGetUntil(t, framework.GuestURL(vmi.Status.Interfaces[0].IP, 80, "/"), "vmkit guest "+name, 3*time.Minute)
		t.Logf("%s: the disk-booted guest answers HTTP %v after create: %q", name, time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		lines, err := c.Console(ctx, "default", name, guestMarker)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, v.banner) }) {
			t.Errorf("%s: the console shows no %q line (not booted by its disk's boot loader?): %q", name, v.banner, lines)
		}
		pod := launcherPod(t, c, vmi)
		logMemory(t, c, vmi, &pod) // docs/performance.md: the disk guest's launcher beside its memory
		if v.vm == bios {
			// The empty disk takes what the guest writes and gives it back.
			ip := vmi.Status.Interfaces[0].IP
			marker := fmt.Sprintf("scratch-%d", time.Now().UnixNano())
			suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vdb="+marker), "wrote "+marker+" to /dev/vdb", time.Minute)
			suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vdb"), marker+"\n", 30*time.Second)
		}
	}
}

// TestReplicaSet: examples/vmirs-tiny.yaml's replica set, started with one
// replica and scaled to two and back to one through the scale subresource
// (what `kubectl scale` sends), keeps the older Running VMI; deleting the
// replica set deletes its VMIs and their launcher pods.
func TestReplicaSet(t *testing.T) {
	c := suite.Need(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "vmirs-tiny.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rs := &v1.VirtualMachineInstanceReplicaSet{}
	if err := yaml.UnmarshalStrict(data, rs); err != nil {
		t.Fatal(err)
	}
	rs.Namespace = "default"
	one := int32(1)
	rs.Spec.Replicas = &one
	sets := c.Client.KubevirtV1().VirtualMachineInstanceReplicaSets("default")
	if _, err := sets.Create(t.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sets.Delete(ctx, rs.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", rs.Name, err)
		}
		suite.WaitFor(t, "VMIs and launcher pods of "+rs.Name+" gone", 2*time.Minute, func() (bool, string) {
			vmis, err := c.Client.KubevirtV1().VirtualMachineInstances("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + rs.Name})
			if err != nil {
				return false, err.Error()
			}
			pods, err := c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + rs.Name})
			if err != nil {
				return false, err.Error()
			}
			return len(vmis.Items)+len(pods.Items) == 0, fmt.Sprintf("%d VMIs, %d pods", len(vmis.Items), len(pods.Items))
		})
	})
	runningVMIs := func(n int) []v1.VirtualMachineInstance {
		t.Helper()
		var got []v1.VirtualMachineInstance
		suite.WaitFor(t, fmt.Sprintf("%d Running VMIs of %s", n, rs.Name), 3*time.Minute, func() (bool, string) {
			list, err := c.Client.KubevirtV1().VirtualMachineInstances("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + rs.Name})
			if err != nil {
				return false, err.Error()
			}
			got = got[:0]
			phases := ""
			for _, v := range list.Items {
				phases += " " + v.Name + "=" + string(v.Status.Phase)
				if v.DeletionTimestamp == nil && v.Status.Phase == v1.Running {
					got = append(got, v)
				}
			}
			return len(got) == n && len(list.Items) == n, phases
		})
		return got
	}
	scale := func(n int32) {
		t.Helper()
		s, err := sets.GetScale(t.Context(), rs.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = n
		if _, err := sets.UpdateScale(t.Context(), rs.Name, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first := runningVMIs(1)[0]
	time.Sleep(1100 * time.Millisecond) // creation timestamps have whole seconds: the next VMI is younger
	scale(2)
	runningVMIs(2)
	suite.WaitFor(t, rs.Name+" status: 2 ready replicas", time.Minute, func() (bool, string) {
		got, err := sets.Get(t.Context(), rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.Replicas == 2 && got.Status.ReadyReplicas == 2, fmt.Sprintf("%+v", got.Status)
	})
	scale(1)
	if left := runningVMIs(1); left[0].UID != first.UID {
		t.Errorf("scaled 2 → 1: %s is left, want the older Running VMI %s", left[0].Name, first.Name)
	}
}

func logTimeline(t testing.TB, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) {
	t.Helper()
	created, err := suite.Need(t).Client.KubevirtV1().VirtualMachines(vm.Namespace).Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	at := func(ts metav1.Time) string { return ts.Sub(created.CreationTimestamp.Time).Round(time.Second).String() }
	var b strings.Builder
	for _, p := range vmi.Status.PhaseTransitionTimestamps {
		fmt.Fprintf(&b, " VMI %s +%s;", p.Phase, at(p.PhaseTransitionTimestamp))
	}
	fmt.Fprintf(&b, " pod created +%s;", at(pod.CreationTimestamp))
	for _, cond := range pod.Status.Conditions {
		fmt.Fprintf(&b, " pod %s +%s;", cond.Type, at(cond.LastTransitionTime))
	}
	for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if r := st.State.Running; r != nil {
			fmt.Fprintf(&b, " %s started +%s;", st.Name, at(r.StartedAt))
		}
		if tm := st.State.Terminated; tm != nil {
			fmt.Fprintf(&b, " %s ran +%s..+%s;", st.Name, at(tm.StartedAt), at(tm.FinishedAt))
		}
	}
	t.Logf("timeline (second resolution):%s", b.String())
}

// logMemory logs the memory working set of the launcher pod's containers,
// computed from their memory cgroups as the kubelet's cAdvisor does
// (usage minus inactive file pages), beside the guest's memory. (The
// kubelet's summary API is not reachable through kube-apiserver's node
// proxy here: it refuses loopback node addresses.)
func logMemory(t testing.TB, c *cluster.Cluster, vmi *v1.VirtualMachineInstance, launcher *corev1.Pod) {
	t.Helper()
	var b strings.Builder
	sets := workingSets(launcher)
	for _, st := range launcher.Status.ContainerStatuses {
		if mib, ok := sets[st.Name]; ok {
			fmt.Fprintf(&b, " %s %.1f MiB;", st.Name, mib)
		} else {
			fmt.Fprintf(&b, " %s: no memory cgroup;", st.Name)
		}
	}
	t.Logf("launcher pod %s working sets (guest memory %s, pod request %s):%s", launcher.Name,
		vmi.Spec.Domain.Resources.Requests.Memory(), launcher.Spec.Containers[0].Resources.Requests.Memory(), b.String())
}

// workingSets are the working sets in MiB of pod's containers, by name,
// from their memory cgroups (v1) as the kubelet's cAdvisor computes them:
// usage minus inactive file pages. A container without a cgroup is left out.
func workingSets(pod *corev1.Pod) map[string]float64 {
	sets := map[string]float64{}
	for _, st := range pod.Status.ContainerStatuses {
		id := st.ContainerID[strings.Index(st.ContainerID, "://")+3:]
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/kubepods*", "*pod"+string(pod.UID), id))
		more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/kubepods*", "*", "*pod"+string(pod.UID), id))
		dirs = append(dirs, more...)
		if len(dirs) == 0 {
			continue
		}
		usage, _ := os.ReadFile(filepath.Join(dirs[0], "memory.usage_in_bytes"))
		stat, _ := os.ReadFile(filepath.Join(dirs[0], "memory.stat"))
		u, _ := strconv.ParseUint(strings.TrimSpace(string(usage)), 10, 64)
		var inactive uint64
		for _, line := range strings.Split(string(stat), "\n") {
			if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
				inactive, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		sets[st.Name] = float64(u-min(inactive, u)) / (1 << 20)
	}
	return sets
}

// BenchmarkPodNetworkStart measures, per iteration, a VM of
// examples/vm-net.yaml (masquerade on the pod network) from create to
// Running and to its guest answering HTTP on the pod IP, and the same VM
// without an interface (autoattachPodInterface: false) to Running: the
// difference is what wiring the network adds. It reports p50 and p95 in
// seconds (docs/performance.md):
//
//	go test -run '^$' -bench PodNetworkStart -benchtime 10x ./test/e2e/
func BenchmarkPodNetworkStart(b *testing.B) {
	c := suite.Need(b)
	var toRunning, toHTTP, bareToRunning []time.Duration
	for i := 0; b.Loop(); i++ {
		vm := framework.ExampleVM(b, "vm-net.yaml", fmt.Sprintf("bench-net-%d", i), v1.RunStrategyAlways)
		began := time.Now()
		startAndWait(b, c, vm)
		toRunning = append(toRunning, time.Since(began))
		vmi := framework.WaitVMI(b, c, vm.Name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
			return len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
		})
		suite.HTTPGetUntil(b, framework.GuestURL(vmi.Status.Interfaces[0].IP, 80, "/"), "vmkit guest "+vm.Name, 90*time.Second)
		toHTTP = append(toHTTP, time.Since(began))
		deleteAndWait(b, c, vm.Name)

		bare := framework.ExampleVM(b, "vm-net.yaml", fmt.Sprintf("bench-bare-%d", i), v1.RunStrategyAlways)
		bare.Spec.Template.Spec.Domain.Devices.Interfaces, bare.Spec.Template.Spec.Networks = nil, nil
		bare.Spec.Template.Spec.Domain.Devices.AutoattachPodInterface = v1.BoolPtr(false)
		began = time.Now()
		startAndWait(b, c, bare)
		bareToRunning = append(bareToRunning, time.Since(began))
		deleteAndWait(b, c, bare.Name)
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"net-running", toRunning}, {"net-http", toHTTP}, {"bare-running", bareToRunning}} {
		reportPercentiles(b, m.name, m.d)
	}
	b.ReportMetric(0, "ns/op")
}

// startAndWait creates vm and waits until its VMI is Running.
func startAndWait(b *testing.B, c *cluster.Cluster, vm *v1.VirtualMachine) {
	if _, err := c.Client.KubevirtV1().VirtualMachines(vm.Namespace).Create(b.Context(), vm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	framework.WaitVMI(b, c, vm.Name, "Running", running)
}

// deleteAndWait deletes the VM and waits until its launcher pods are gone.
func deleteAndWait(b *testing.B, c *cluster.Cluster, name string) {
	if err := c.Client.KubevirtV1().VirtualMachines("default").Delete(b.Context(), name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	suite.WaitFor(b, "launcher pods of "+name+" gone", 2*time.Minute, func() (bool, string) {
		pods, err := c.Kube.CoreV1().Pods("default").List(b.Context(), metav1.ListOptions{LabelSelector: "kubevirt.io/vm=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}
