package vmcontrol_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
	"github.com/vmkit/vmkit/vmcontrol/vm"
)

func sizedVM(name, instancetypeName string) *v1.VirtualMachine {
	vm := newVM(name, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
	vm.Spec.Instancetype = &v1.InstancetypeMatcher{Name: instancetypeName, Kind: "VirtualMachineInstancetype"}
	vm.Spec.Preference = &v1.PreferenceMatcher{Name: "linux"}
	vm.Spec.Template.Spec.Domain.Devices.Disks[0].Disk.Bus = ""
	return vm
}

// newVMI waits for the VM's instance other than the one with UID old.
func (c *cluster) newVMI(t *testing.T, name string, old types.UID) *v1.VirtualMachineInstance {
	t.Helper()
	var got *v1.VirtualMachineInstance
	waitFor(t, 30*time.Second, "a new VMI "+name, func(ctx context.Context) (bool, error) {
		vmi, err := c.vmi(ctx, name)
		if err != nil || vmi.UID == old || vmi.DeletionTimestamp != nil {
			return false, nil
		}
		got = vmi
		return true, nil
	})
	return got
}

func (c *cluster) failure(t *testing.T, name, reason, message string) {
	t.Helper()
	waitFor(t, 30*time.Second, "VM "+name+" Failure "+reason, func(ctx context.Context) (bool, error) {
		got, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineFailure && cond.Reason == reason && strings.Contains(cond.Message, message) {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestInstancetypes runs the controllers against a real API server: a VM
// sized by an instance type and shaped by a preference starts with their
// CPU, memory and devices; the copies it pinned outlive an edit of the
// instance type (its restart keeps the old size, a new VM gets the new one);
// a template that conflicts, or a missing instance type, is reported on the
// VM, and the VM starts once the instance type exists.
func TestInstancetypes(t *testing.T) {
	c := startCluster(t)
	c.fakeKubelet(t)
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()
	its := c.client.InstancetypeV1beta1()
	small := &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: ns},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: 2},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("128Mi")},
		},
	}
	if _, err := its.VirtualMachineInstancetypes(ns).Create(ctx, small, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cores := instancetypev1beta1.Cores
	if _, err := its.VirtualMachineClusterPreferences().Create(ctx, &instancetypev1beta1.VirtualMachineClusterPreference{
		ObjectMeta: metav1.ObjectMeta{Name: "linux"},
		Spec: instancetypev1beta1.VirtualMachinePreferenceSpec{
			CPU:     &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &cores},
			Devices: &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSATA},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	c.createVM(t, sizedVM("sized", "small"))
	vmi := c.waitVMIPhase(t, "sized", v1.Scheduled)
	if cpu := vmi.Spec.Domain.CPU; cpu == nil || cpu.Cores != 2 || cpu.Sockets != 1 {
		t.Errorf("cpu = %+v, want 2 cores", cpu)
	}
	if g := vmi.Spec.Domain.Memory.Guest; g == nil || g.String() != "128Mi" {
		t.Errorf("guest memory = %v, want 128Mi", g)
	}
	if bus := vmi.Spec.Domain.Devices.Disks[0].Disk.Bus; bus != v1.DiskBusSATA {
		t.Errorf("disk bus %q, want sata", bus)
	}
	if vmi.Annotations[v1.InstancetypeAnnotation] != "small" || vmi.Annotations[v1.ClusterPreferenceAnnotation] != "linux" {
		t.Errorf("annotations %v", vmi.Annotations)
	}
	sized, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "sized", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := sized.Status.InstancetypeRef
	if ref == nil || ref.ControllerRevisionRef == nil || sized.Status.PreferenceRef == nil || sized.Status.PreferenceRef.ControllerRevisionRef == nil {
		t.Fatalf("status refs %+v, %+v", ref, sized.Status.PreferenceRef)
	}
	revs, err := c.kube.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{LabelSelector: instancetype.ControllerRevisionObjectNameLabel + "=small"})
	if err != nil || len(revs.Items) != 1 || revs.Items[0].Name != ref.ControllerRevisionRef.Name || metav1.GetControllerOf(&revs.Items[0]).UID != sized.UID {
		t.Fatalf("revisions of small: %v, %v; want %s, controlled by the VM", revs, err, ref.ControllerRevisionRef.Name)
	}

	// The instance type grows; the VM's next instance keeps the pinned size.
	cur, err := its.VirtualMachineInstancetypes(ns).Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.CPU.Guest = 4
	if _, err := its.VirtualMachineInstancetypes(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.setVMIPhase(t, "sized", v1.Succeeded) // the guest shut down: Always starts it again
	restarted := c.newVMI(t, "sized", vmi.UID)
	if cpu := restarted.Spec.Domain.CPU; cpu.Cores != 2 {
		t.Errorf("the restarted VM has %d vCPUs, want the pinned 2", cpu.Cores)
	}
	c.createVM(t, sizedVM("fresh", "small"))
	if cpu := c.waitVMIPhase(t, "fresh", v1.Scheduled).Spec.Domain.CPU; cpu.Cores != 4 {
		t.Errorf("a new VM has %d vCPUs, want the edited 4", cpu.Cores)
	}

	// A template setting sockets conflicts with the instance type.
	conflicting := sizedVM("conflicting", "small")
	conflicting.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 2}
	c.createVM(t, conflicting)
	c.failure(t, "conflicting", vm.ReasonFailedCreate, "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type (which sets spec.cpu.guest)")
	waitFor(t, 30*time.Second, "the conflict's event", func(ctx context.Context) (bool, error) {
		events, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=conflicting"})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == vm.ReasonFailedCreate && strings.Contains(e.Message, "spec.template.spec.domain.cpu.sockets") {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := c.vmi(ctx, "conflicting"); !apierrors.IsNotFound(err) {
		t.Errorf("a conflicting VM got an instance (err %v)", err)
	}

	// A VM naming an instance type that does not exist yet starts once it does.
	c.createVM(t, sizedVM("waiting", "later"))
	c.failure(t, "waiting", vm.ReasonFailedFindInstancetype, `"later" not found`)
	later := small.DeepCopy()
	later.Name = "later"
	if _, err := its.VirtualMachineInstancetypes(ns).Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitVMIPhase(t, "waiting", v1.Scheduled)

	// The revisions go with their VM.
	if err := c.client.KubevirtV1().VirtualMachines(ns).Delete(ctx, "fresh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the revisions of VM fresh to be collected", func(ctx context.Context) (bool, error) {
		revs, err := c.kube.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, r := range revs.Items {
			if strings.HasPrefix(r.Name, "fresh-") {
				return false, nil
			}
		}
		return true, nil
	})
}
