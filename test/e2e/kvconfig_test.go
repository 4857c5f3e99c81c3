package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/podtemplate"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestKubeVirtConfigurationLive: the KubeVirt CR's cpuModel, cpuRequest,
// amd64 machine type, memoryOvercommit and defaultNetworkInterface, edited
// on a running installation, apply to the next VM without a restart or a
// redeploy of any component: the VMI stores them, the launcher pod requests
// the CPU and the overcommitted memory, and QEMU runs with the model and
// machine type.
func TestKubeVirtConfigurationLive(t *testing.T) {
	c := suite.Need(t)
	controllers := func() []types.UID {
		pods, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtControllerValue})
		if err != nil {
			t.Fatal(err)
		}
		var uids []types.UID
		for _, p := range pods.Items {
			uids = append(uids, p.UID)
		}
		slices.Sort(uids)
		return uids
	}
	before := controllers()

	const patch = `{"spec":{"configuration":{"cpuModel":"Nehalem","cpuRequest":"250m",` +
		`"architectureConfiguration":{"amd64":{"machineType":"pc-q35-7.1"}},` +
		`"developerConfiguration":{"memoryOvercommit":200},` +
		`"network":{"defaultNetworkInterface":"masquerade"}}}}`
	const unpatch = `{"spec":{"configuration":{"cpuModel":null,"cpuRequest":null,"architectureConfiguration":null,` +
		`"developerConfiguration":{"memoryOvercommit":null},"network":{"defaultNetworkInterface":null}}}}`
	kvs := c.Client.KubevirtV1().KubeVirts(cluster.Namespace)
	if _, err := kvs.Patch(t.Context(), cluster.KubeVirtName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kvs.Patch(context.Background(), cluster.KubeVirtName, types.MergePatchType, []byte(unpatch), metav1.PatchOptions{}); err != nil {
			t.Errorf("restoring the KubeVirt CR: %v", err)
		}
	})
	// The controllers read the CR from their informer: wait until the
	// edit is there to read (the API server's own answer is the bound).
	suite.WaitFor(t, "KubeVirt CR edited", 30*time.Second, func() (bool, string) {
		kv, err := kvs.Get(t.Context(), cluster.KubeVirtName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return kv.Spec.Configuration.CPUModel == "Nehalem", kv.Spec.Configuration.CPUModel
	})
	time.Sleep(2 * time.Second) // the watch event reaches virt-controller's informer

	// The tiny guest with nothing the configuration would decide: no
	// machine type, no CPU model, no interfaces, guest memory only.
	vm := tinyVM(t, "vm-kvconfig", v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Machine = nil
	spec.Domain.Devices.AutoattachPodInterface = nil
	guest := resource.MustParse("128Mi")
	spec.Domain.Memory = &v1.Memory{Guest: &guest}
	spec.Domain.Resources.Requests = nil
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)

	if got := vmi.Spec.Domain.CPU; got == nil || got.Model != "Nehalem" {
		t.Errorf("VMI cpu %+v, want the CR's model Nehalem", got)
	}
	if got := vmi.Spec.Domain.Machine; got == nil || got.Type != "pc-q35-7.1" {
		t.Errorf("VMI machine %+v, want the CR's pc-q35-7.1", got)
	}
	if got, ok := vmi.Spec.Domain.Resources.Requests[corev1.ResourceCPU]; !ok || got.Cmp(resource.MustParse("250m")) != 0 {
		t.Errorf("VMI CPU request %s (set %v), want the CR's 250m", got.String(), ok)
	}
	if got := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse("64Mi")) != 0 {
		t.Errorf("VMI memory request %s, want 64Mi (128Mi guest at 200%% overcommit)", got.String())
	}
	if ifs := vmi.Spec.Domain.Devices.Interfaces; len(ifs) != 1 || ifs[0].Masquerade == nil {
		t.Errorf("VMI interfaces %+v, want the CR's default masquerade", ifs)
	}
	// The pod asks for the VMI's 64Mi and the launcher's overhead (what
	// virt-controller's renderer adds, with the installation's defaults),
	// not for the 128Mi guest.
	pod := launcherPod(t, c, vmi)
	kvm, _ := cluster.KVM() // emulated guests' pods also hold QEMU's translation cache
	renderer, err := podtemplate.New(podtemplate.Config{LauncherImage: pod.Spec.Containers[0].Image, EmulationAllowed: !kvm})
	if err != nil {
		t.Fatal(err)
	}
	want := resource.MustParse("64Mi")
	want.Add(renderer.MemoryOverhead(vmi))
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("250m")) != 0 {
		t.Errorf("launcher pod %s requests %s of CPU, want the VMI's 250m", pod.Name, got.String())
	}
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; got.Cmp(want) != 0 {
		t.Errorf("launcher pod %s requests %s of memory, want %s: the overcommitted 64Mi and the overhead", pod.Name, got.String(), want.String())
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemuPID(t, "default", vm.Name)))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(cmdline), "\x00")
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "Nehalem") }) ||
		!slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "pc-q35-7.1") }) {
		t.Errorf("QEMU runs without -cpu Nehalem or machine pc-q35-7.1: %q", args)
	}
	if after := controllers(); !slices.Equal(before, after) {
		t.Errorf("virt-controller pods changed from %v to %v: the edit must apply without a redeploy", before, after)
	}
}
