package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Compute the spec asks for, on the e2e node's kubelet (#38 items 1 and 3):
// its static CPU manager policy gives a Guaranteed launcher pod a CPU of its
// own, and its 2 MiB huge page pool backs a guest's memory.

// TestDedicatedCPUs: a VM with dedicatedCpuPlacement runs in a Guaranteed
// launcher pod on a node the node agent labelled kubevirt.io/cpumanager,
// the kubelet gives the pod's compute container a host CPU of its own, and
// the guest's vCPU thread is pinned to exactly that CPU.
func TestDedicatedCPUs(t *testing.T) {
	c := suite.Need(t)
	node, err := c.Kube.CoreV1().Nodes().Get(t.Context(), c.Env.Node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1.CPUManager] != "true" || node.Labels[v1.DeprecatedCPUManager] != "true" {
		t.Fatalf("node %s labels %v: want %s=true and %s=true (its kubelet runs the static CPU manager policy)", node.Name, node.Labels, v1.CPUManager, v1.DeprecatedCPUManager)
	}
	vm := tinyVM(t, "vm-dedicated", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Cores: 1, DedicatedCPUPlacement: true}
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	pod := launcherPod(t, c, vmi)
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("launcher pod %s has QoS class %s, want Guaranteed", pod.Name, pod.Status.QOSClass)
	}
	if pod.Spec.NodeSelector[v1.CPUManager] != "true" {
		t.Errorf("launcher pod %s node selector %v: want %s=true", pod.Name, pod.Spec.NodeSelector, v1.CPUManager)
	}
	// The kubelet's checkpoint names the CPU it gave the compute container.
	state, err := os.ReadFile(filepath.Join(c.Env.Node.KubeletRootDir, "cpu_manager_state"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(state), `"policyName":"static"`) || !strings.Contains(string(state), string(pod.UID)) {
		t.Errorf("the kubelet's cpu_manager_state has no assignment for pod %s: %s", pod.UID, state)
	}
	pid := qemuPID(t, "default", vm.Name)
	qemuCPUs := allowedCPUs(t, fmt.Sprintf("/proc/%d/status", pid))
	if qemuCPUs != "1" { // CPU 0 is the node's reservedSystemCPUs
		t.Errorf("QEMU (pid %d) may run on CPUs %q, want the one CPU the kubelet gave the pod, 1", pid, qemuCPUs)
	}
	threads := vcpuThreads(t, pid)
	if len(threads) != 1 {
		t.Fatalf("QEMU (pid %d) has %d vCPU threads, want 1: %v", pid, len(threads), threads)
	}
	for name, tid := range threads {
		if got := allowedCPUs(t, fmt.Sprintf("/proc/%d/task/%d/status", pid, tid)); got != qemuCPUs {
			t.Errorf("vCPU thread %q (%d) is pinned to CPUs %q, want %q", name, tid, got, qemuCPUs)
		}
	}
	t.Logf("pod %s (%s) got CPU %s; vCPU threads %v", pod.Name, pod.Status.QOSClass, qemuCPUs, threads)
}

// TestHugePages: a VM whose memory is backed by 2 MiB huge pages asks the
// kubelet for hugepages-2Mi, boots, and its QEMU maps its RAM from the
// pod's hugetlbfs, taking its memory's worth of pages out of the host's pool.
func TestHugePages(t *testing.T) {
	c := suite.Need(t)
	node, err := c.Kube.CoreV1().Nodes().Get(t.Context(), c.Env.Node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := resource.NewQuantity(cluster.HugePages2Mi*2<<20, resource.BinarySI)
	if got := node.Status.Allocatable["hugepages-2Mi"]; got.Cmp(*want) != 0 {
		t.Fatalf("node %s allocatable hugepages-2Mi = %s, want %s", node.Name, got.String(), want)
	}
	freeBefore := hugePagesFree(t)
	vm := tinyVM(t, "vm-hugepages", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Hugepages: &v1.Hugepages{PageSize: "2Mi"}}
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	pod := launcherPod(t, c, vmi)
	var requested resource.Quantity
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == "compute" {
			requested = ctr.Resources.Requests["hugepages-2Mi"]
		}
	}
	if requested.Value() != 128<<20 {
		t.Errorf("compute container requests hugepages-2Mi %s, want the guest's 128Mi", requested.String())
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemuPID(t, "default", vm.Name)))
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.ReplaceAll(string(data), "\x00", " "); !strings.Contains(args, "/dev/hugepages") {
		t.Errorf("QEMU's memory is not backed by the pod's hugetlbfs (/dev/hugepages): %s", args)
	}
	// The guest touched some of its RAM while booting: pages left the pool.
	if used := freeBefore - hugePagesFree(t); used <= 0 || used > 64 {
		t.Errorf("the guest took %d huge pages out of the host's pool (free %d before), want 1 to 64 (its 128Mi)", used, freeBefore)
	}
}

// TestNUMAPassthrough: a VM with dedicated CPUs, huge pages and KubeVirt's
// guestMappingPassthrough gets one guest NUMA cell holding its vCPU and
// its huge-page memory, for the host NUMA node of its pinned CPU (the e2e
// node has one), and boots.
func TestNUMAPassthrough(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-numa", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Cores: 1, DedicatedCPUPlacement: true,
		NUMA: &v1.NUMA{GuestMappingPassthrough: &v1.NUMAGuestMappingPassthrough{}}}
	vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Hugepages: &v1.Hugepages{PageSize: "2Mi"}}
	framework.CreateVM(t, c, vm)
	framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemuPID(t, "default", vm.Name)))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.ReplaceAll(string(data), "\x00", " ")
	for _, want := range []string{"-numa node,nodeid=0,cpus=0,memdev=ram-node0", "/dev/hugepages"} {
		if !strings.Contains(args, want) {
			t.Errorf("QEMU's command line has no %s: %s", want, args)
		}
	}
}

// allowedCPUs reads Cpus_allowed_list from a /proc status file.
func allowedCPUs(t *testing.T, status string) string {
	t.Helper()
	data, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in %s", status)
	return ""
}

// vcpuThreads returns QEMU's vCPU threads ("CPU 0/KVM", "CPU 0/TCG") by
// name.
func vcpuThreads(t *testing.T, pid int) map[string]int {
	t.Helper()
	comms, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	threads := map[string]int{}
	for _, comm := range comms {
		name, err := os.ReadFile(comm)
		if err != nil {
			continue
		}
		if n := strings.TrimSpace(string(name)); strings.HasPrefix(n, "CPU ") {
			tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(comm)))
			threads[n] = tid
		}
	}
	return threads
}

// hugePagesFree reads HugePages_Free from /proc/meminfo.
func hugePagesFree(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "HugePages_Free:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no HugePages_Free in /proc/meminfo")
	return 0
}

// TestCPUHotplug (#38 item 4): with KubeVirt's LiveUpdate rollout (the
// default), a running VM given a second socket within maxSockets gets it
// live: the VMI's spec and status.currentCPUTopology say 2 sockets, QEMU
// runs a second vCPU thread, the guest's kernel reports the new CPU on the
// console, and the VM needs no restart.
func TestCPUHotplug(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := tinyVM(t, "vm-cpu-hotplug", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 1, MaxSockets: 2}
	kb := vm.Spec.Template.Spec.Domain.Firmware.KernelBoot
	kb.KernelArgs = strings.Replace(kb.KernelArgs, "quiet", "loglevel=7", 1) // KERN_INFO on the console
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	patch := []byte(`{"spec":{"template":{"spec":{"domain":{"cpu":{"sockets":2}}}}}}`)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, vm.Name, "2 sockets in spec and status.currentCPUTopology", func(got *v1.VirtualMachineInstance) bool {
		t := got.Status.CurrentCPUTopology
		return got.UID == vmi.UID && got.Spec.Domain.CPU.Sockets == 2 && t != nil && t.Sockets == 2
	})
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if lines, err := c.Console(cctx, "default", vm.Name, "has been hot-added"); err != nil {
		t.Fatalf("the guest did not report the new CPU: %v (console: %q)", err, lines)
	}
	if threads := vcpuThreads(t, qemuPID(t, "default", vm.Name)); len(threads) != 2 {
		t.Errorf("QEMU vCPU threads %v, want 2", threads)
	}
	got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range got.Status.Conditions {
		if cond.Type == v1.VirtualMachineRestartRequired {
			t.Errorf("VM condition %+v after a hot-plugged socket, want none", cond)
		}
	}
}

// TestMemoryHotplug: a running VM whose guest memory grows within its
// maxGuest (KubeVirt's LiveUpdate) gets it without a restart. The VM
// controller raises the instance's memory; the VMI controller grows the
// launcher pod in place (pods/resize), where KubeVirt migrates to a bigger
// pod; the node agent plugs the memory into the guest (virtio-mem). The
// guest's MemTotal grows by 256Mi, status.memory reports it, the pod's
// request grew by as much (and its overhead), and the VM asks for no
// restart; memory beyond maxGuest asks for one.
func TestMemoryHotplug(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-mem-hotplug", v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Memory = &v1.Memory{Guest: ptr(resource.MustParse("1Gi")), MaxGuest: ptr(resource.MustParse("2Gi"))}
	delete(spec.Domain.Resources.Requests, corev1.ResourceMemory)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running with an address", func(vmi *v1.VirtualMachineInstance) bool {
		return running(vmi) && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	if m := vmi.Status.Memory; m == nil || m.GuestAtBoot == nil || m.GuestAtBoot.String() != "1Gi" || m.GuestRequested.String() != "1Gi" {
		t.Fatalf("status.memory at start = %+v, want 1Gi booted and requested", m)
	}
	meminfo := framework.GuestURL(vmi.Status.Interfaces[0].IP, 80, "/cgi-bin/meminfo")
	before := memTotalKiB(t, suite.HTTPGetUntil(t, meminfo, "MemTotal:", 2*time.Minute))
	podBefore := launcherPod(t, c, vmi)
	reqBefore := computeMemoryRequest(t, &podBefore)

	patch := []byte(`{"spec":{"template":{"spec":{"domain":{"memory":{"guest":"1280Mi"}}}}}}`)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var got *v1.VirtualMachineInstance
	suite.WaitFor(t, "1280Mi requested and current", 3*time.Minute, func() (bool, string) {
		var err error
		got, err = c.Client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m := got.Status.Memory
		done := got.UID == vmi.UID && m != nil && m.GuestRequested != nil && m.GuestCurrent != nil &&
			m.GuestRequested.String() == "1280Mi" && m.GuestCurrent.String() == "1280Mi" &&
			got.VMICondition(v1.VirtualMachineInstanceMemoryChange) == nil
		return done, fmt.Sprintf("spec memory %+v, status.memory %+v, HotMemoryChange %+v, events %s",
			got.Spec.Domain.Memory, m, got.VMICondition(v1.VirtualMachineInstanceMemoryChange), events(ctx, c.Kube.CoreV1().Events("default")))
	})
	t.Logf("template memory 1Gi → 1280Mi: the guest has it %v later", time.Since(began).Round(time.Millisecond))
	if got.Status.Memory.GuestAtBoot.String() != "1Gi" {
		t.Errorf("status.memory.guestAtBoot = %s after the hotplug, want 1Gi", got.Status.Memory.GuestAtBoot)
	}
	suite.WaitFor(t, "the guest's MemTotal grown by 256Mi", time.Minute, func() (bool, string) {
		body := suite.HTTPGetUntil(t, meminfo, "MemTotal:", 30*time.Second)
		after := memTotalKiB(t, body)
		return after-before == 256<<10, fmt.Sprintf("MemTotal %d KiB → %d KiB", before, after)
	})
	podAfter := launcherPod(t, c, got)
	if podAfter.UID != podBefore.UID {
		t.Fatalf("the launcher pod changed (%s → %s): the VM was restarted or migrated", podBefore.UID, podAfter.UID)
	}
	reqAfter := computeMemoryRequest(t, &podAfter)
	// 256Mi, plus the little more overhead (page tables) more guest memory takes.
	if grew := reqAfter.Value() - reqBefore.Value(); grew < 256<<20 || grew > 264<<20 {
		t.Errorf("the compute container's memory request grew by %d bytes (%s → %s), want 256Mi and its overhead", grew, reqBefore.String(), reqAfter.String())
	}
	gotVM, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range gotVM.Status.Conditions {
		if cond.Type == v1.VirtualMachineRestartRequired {
			t.Errorf("VM condition %+v after hot-plugged memory, want none", cond)
		}
	}

	// Beyond maxGuest needs a restart, as on KubeVirt.
	patch = []byte(`{"spec":{"template":{"spec":{"domain":{"memory":{"guest":"3Gi","maxGuest":"4Gi"}}}}}}`)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.WaitFor(t, "RestartRequired on the VM", time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineRestartRequired && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", got.Status.Conditions)
	})
}

// memTotalKiB parses the guest's "MemTotal: N kB" line.
func memTotalKiB(t *testing.T, body string) int64 {
	t.Helper()
	f := strings.Fields(body)
	if len(f) < 2 || f[0] != "MemTotal:" {
		t.Fatalf("meminfo %q", body)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatalf("meminfo %q: %v", body, err)
	}
	return n
}

// computeMemoryRequest is the memory request of a launcher pod's compute
// container, as the kubelet reports it applied (else its spec's).
func computeMemoryRequest(t *testing.T, pod *corev1.Pod) resource.Quantity {
	t.Helper()
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "compute" && cs.Resources != nil {
			return cs.Resources.Requests[corev1.ResourceMemory]
		}
	}
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == "compute" {
			return ctr.Resources.Requests[corev1.ResourceMemory]
		}
	}
	t.Fatalf("pod %s has no compute container", pod.Name)
	return resource.Quantity{}
}

// TestAcceleration: the cluster runs guests on KVM where this machine's
// /dev/kvm works, as a KubeVirt installation does (useEmulation false: the
// launcher pod gets /dev/kvm, and /dev/vhost-net where the node has it,
// through devices.kubevirt.io/kvm), and under TCG where it does not. A VM
// with a virtio NIC is scheduled either way (no vhost-net request) and
// answers HTTP. The hypervisor tests (nodeagent/hypervisor/libvirt) boot
// the same guest under TCG on every machine.
func TestAcceleration(t *testing.T) {
	c := suite.Need(t)
	kvm, why := cluster.KVM()
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-accel", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running with an address", func(vmi *v1.VirtualMachineInstance) bool {
		return running(vmi) && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	suite.HTTPGetUntil(t, framework.GuestURL(vmi.Status.Interfaces[0].IP, 80, "/"), "vmkit guest", 2*time.Minute)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemuPID(t, "default", vm.Name)))
	if err != nil {
		t.Fatal(err)
	}
	cmdline := strings.ReplaceAll(string(data), "\x00", " ")
	want := "accel=tcg"
	if kvm {
		want = "accel=kvm"
	}
	if !strings.Contains(cmdline, want) && !strings.Contains(cmdline, "-accel "+strings.TrimPrefix(want, "accel=")) {
		t.Errorf("QEMU runs without %s (this machine's KVM: %v %s): %s", want, kvm, why, cmdline)
	}
	pod := launcherPod(t, c, vmi)
	for _, ctr := range pod.Spec.Containers {
		if _, ok := ctr.Resources.Requests[v1.VhostNetDevice]; ok {
			t.Errorf("container %s asks for %s, which a node without the vhost_net module never has", ctr.Name, v1.VhostNetDevice)
		}
		if _, ok := ctr.Resources.Requests[v1.KVMDevice]; ok != kvm && ctr.Name == "compute" {
			t.Errorf("the compute container asks for %s: %v, want %v (KVM on this machine)", v1.KVMDevice, ok, kvm)
		}
	}
	t.Logf("guest on %s (KVM usable: %v %s)", want, kvm, why)
}
