package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// instancetypeExample reads examples/vm-instancetype.yaml: its instance
// type, preference and VM.
func instancetypeExample(t testing.TB) (*instancetypev1beta1.VirtualMachineInstancetype, *instancetypev1beta1.VirtualMachinePreference, *v1.VirtualMachine) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "vm-instancetype.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	it, pref, vm := &instancetypev1beta1.VirtualMachineInstancetype{}, &instancetypev1beta1.VirtualMachinePreference{}, &v1.VirtualMachine{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var into any = vm
		switch {
		case strings.Contains(doc, "\nkind: VirtualMachineInstancetype\n"):
			into = it
		case strings.Contains(doc, "\nkind: VirtualMachinePreference\n"):
			into = pref
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatal(err)
		}
	}
	return it, pref, vm
}

// qemuSMP returns the -smp argument of the guest's QEMU.
func qemuSMP(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", qemuPID(t, "default", name)))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(data), "\x00")
	for i, a := range args {
		if a == "-smp" && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no -smp in the QEMU command line of %s: %q", name, args)
	return ""
}

// TestInstancetype: examples/vm-instancetype.yaml's VM runs with the
// instance type's vCPUs (as the preference's cores) and memory; growing the
// instance type changes neither the running guest nor its restart, and a new
// VM gets the new size.
func TestInstancetype(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	it, pref, vm := instancetypeExample(t)
	it.Name, pref.Name, it.Namespace, pref.Namespace = "e2e-tiny", "e2e-tiny-guest", "default", "default"
	it.Spec.CPU.Guest = 2
	cores := instancetypev1beta1.Cores
	pref.Spec.CPU = &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &cores}
	its := c.Client.InstancetypeV1beta1()
	if _, err := its.VirtualMachineInstancetypes("default").Create(ctx, it, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := its.VirtualMachinePreferences("default").Create(ctx, pref, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := its.VirtualMachineInstancetypes("default").Delete(ctx, it.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
		if err := its.VirtualMachinePreferences("default").Delete(ctx, pref.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	sized := func(name string) *v1.VirtualMachine {
		cp := vm.DeepCopy()
		cp.Name, cp.Namespace = name, "default"
		cp.Spec.Instancetype.Name, cp.Spec.Preference.Name = it.Name, pref.Name
		cp.Spec.Template.ObjectMeta.Labels["kubevirt.io/vm"] = name
		return cp
	}

	framework.CreateVM(t, c, sized("vm-sized"))
	vmi := framework.WaitVMI(t, c, "vm-sized", "Running", running)
	console(t, c, "vm-sized")
	if cpu := vmi.Spec.Domain.CPU; cpu == nil || cpu.Cores != 2 || cpu.Sockets != 1 {
		t.Errorf("VMI cpu %+v, want 2 cores", cpu)
	}
	if smp := qemuSMP(t, "vm-sized"); !strings.HasPrefix(smp, "2,") || !strings.Contains(smp, "cores=2") {
		t.Errorf("QEMU -smp %q, want 2 vCPUs as cores", smp)
	}
	pod := launcherPod(t, c, vmi)
	if g := vmi.Spec.Domain.Memory.Guest; g == nil || g.String() != "128Mi" {
		t.Errorf("guest memory %v, want the instance type's 128Mi", g)
	}
	t.Logf("launcher pod %s requests %v", pod.Name, pod.Spec.Containers[0].Resources.Requests)

	// Grow the instance type: the running guest and its restart keep 2 vCPUs.
	cur, err := its.VirtualMachineInstancetypes("default").Get(ctx, it.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.CPU.Guest = 3
	if _, err := its.VirtualMachineInstancetypes("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.KubevirtV1().VirtualMachineInstances("default").Delete(ctx, "vm-sized", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted := framework.WaitVMI(t, c, "vm-sized", "a new VMI Running", func(v *v1.VirtualMachineInstance) bool {
		return v.UID != vmi.UID && running(v)
	})
	if restarted.Spec.Domain.CPU.Cores != 2 {
		t.Errorf("the restarted VM has %d vCPUs, want the pinned 2", restarted.Spec.Domain.CPU.Cores)
	}
	if smp := qemuSMP(t, "vm-sized"); !strings.HasPrefix(smp, "2,") {
		t.Errorf("the restarted guest's QEMU -smp %q, want 2 vCPUs", smp)
	}

	framework.CreateVM(t, c, sized("vm-sized-new"))
	framework.WaitVMI(t, c, "vm-sized-new", "Running", running)
	if smp := qemuSMP(t, "vm-sized-new"); !strings.HasPrefix(smp, "3,") || !strings.Contains(smp, "cores=3") {
		t.Errorf("a new VM's QEMU -smp %q, want the edited 3 vCPUs", smp)
	}
}
