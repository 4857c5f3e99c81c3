package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	vmcontrolvm "github.com/vmkit/vmkit/vmcontrol/vm"
	"github.com/vmkit/vmkit/vmctl"
)

// The VM lifecycle as KubeVirt's client and virtctl drive it (#43).

// waitEvent waits for an event of type and reason on the object of uid.
func waitEvent(t *testing.T, c *cluster.Cluster, uid types.UID, typ, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	suite.WaitFor(t, fmt.Sprintf("a %s event %s on %s", typ, reason, uid), 2*time.Minute, func() (bool, string) {
		events, err := c.Kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.Type == typ && e.Reason == reason {
				found = e
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Reason)
		}
		return false, fmt.Sprintf("events %v", seen)
	})
	return found
}

// TestRerunOnFailureStops: the stop subresource stops a RerunOnFailure VM
// for good (its VMI goes, the requests are cleared, the run strategy is
// left), and the graceful stop records ShuttingDown on the VMI.
func TestRerunOnFailureStops(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-rerun-stop", v1.RunStrategyRerunOnFailure)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(t.Context(), "default", vm.Name, v1.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoVMI(t, c, vm.Name)
	waitEvent(t, c, vmi.UID, corev1.EventTypeNormal, "ShuttingDown")
	// It stays stopped: no new VMI for a while, the requests cleared.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if got, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), vm.Name, metav1.GetOptions{}); err == nil {
			t.Fatalf("a stopped RerunOnFailure VM started again: VMI %s %s", got.UID, got.Status.Phase)
		} else if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.StateChangeRequests) != 0 || got.Status.PrintableStatus != v1.VirtualMachineStatusStopped ||
		got.Spec.RunStrategy == nil || *got.Spec.RunStrategy != v1.RunStrategyRerunOnFailure {
		t.Errorf("after the stop: requests %v, printableStatus %s, runStrategy %v; want none, Stopped, RerunOnFailure",
			got.Status.StateChangeRequests, got.Status.PrintableStatus, got.Spec.RunStrategy)
	}
	// And starts again when asked.
	if err := sub.Start(t.Context(), "default", vm.Name, v1.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, vm.Name, "Running again", running)
}

// TestCrashRecordsStopped: a guest killed under a Once VM stays Failed and
// its VMI gets KubeVirt's Warning event Stopped, which tools wait for.
func TestCrashRecordsStopped(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-once-crash", v1.RunStrategyOnce)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	pid := qemuPID(t, "default", vm.Name)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing QEMU (pid %d): %v", pid, err)
	}
	e := waitEvent(t, c, vmi.UID, corev1.EventTypeWarning, "Stopped")
	t.Logf("event %s %s: %s", e.Type, e.Reason, e.Message)
	framework.WaitVMI(t, c, vm.Name, "Failed", func(vmi *v1.VirtualMachineInstance) bool { return vmi.Status.Phase == v1.Failed })
}

// TestErrorPvcNotFound: a VM whose claim does not exist shows KubeVirt's
// printableStatus ErrorPvcNotFound and the instance's Synchronized=False
// condition, and starts once the claim is created.
func TestErrorPvcNotFound(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-no-claim", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "no-such-claim"}}}})
	framework.CreateVM(t, c, vm)
	suite.WaitFor(t, "VM ErrorPvcNotFound", 2*time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		synced := false
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineConditionType(v1.VirtualMachineInstanceSynchronized) && cond.Status == corev1.ConditionFalse && cond.Reason == "FailedPvcNotFound" {
				synced = true
			}
		}
		return got.Status.PrintableStatus == v1.VirtualMachineStatusPvcNotFound && synced, fmt.Sprintf("%s, conditions %+v", got.Status.PrintableStatus, got.Status.Conditions)
	})
}

// TestDeleteVMWithForeignFinalizer: a VM holding the controller's finalizer
// and another one, deleted, loses its VMI and the controller's finalizer;
// only the other finalizer holds it, and removing that deletes it.
func TestDeleteVMWithForeignFinalizer(t *testing.T) {
	c := suite.Need(t)
	const keep = "e2e.vmkit.io/keep"
	vm := tinyVM(t, "vm-finalizers", v1.RunStrategyAlways)
	vm.Finalizers = []string{keep, v1.VirtualMachineControllerFinalizer}
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Create(t.Context(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { // never leave the VM behind
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.Client.KubevirtV1().VirtualMachines("default").Patch(ctx, vm.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = c.Client.KubevirtV1().VirtualMachines("default").Delete(ctx, vm.Name, metav1.DeleteOptions{})
	}()
	framework.WaitVMI(t, c, vm.Name, "Running", running)
	if err := c.Client.KubevirtV1().VirtualMachines("default").Delete(t.Context(), vm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoVMI(t, c, vm.Name)
	suite.WaitFor(t, "only the foreign finalizer left", time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(got.Finalizers) == 1 && got.Finalizers[0] == keep, fmt.Sprintf("finalizers %v", got.Finalizers)
	})
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers","value":[%q]},{"op":"remove","path":"/metadata/finalizers"}]`, keep)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(t.Context(), vm.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.WaitFor(t, "VM gone", time.Minute, func() (bool, string) {
		_, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestStartPaused (#38): `virtctl start --paused` (the start subresource
// with paused: true) gives a guest that is paused from its first
// instruction: the VMI Running with Paused=True (PausedByUser), the VM
// Paused; unpaused, it boots.
func TestStartPaused(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-start-paused", v1.RunStrategyHalted)
	framework.CreateVM(t, c, vm)
	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(t.Context(), "default", vm.Name, v1.StartOptions{Paused: true}); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, vm.Name, "Running and paused", func(vmi *v1.VirtualMachineInstance) bool {
		c := vmi.VMICondition(v1.VirtualMachineInstancePaused)
		return running(vmi) && c != nil && c.Status == corev1.ConditionTrue && c.Reason == "PausedByUser"
	})
	suite.WaitFor(t, "VM Paused", time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.PrintableStatus == v1.VirtualMachineStatusPaused, string(got.Status.PrintableStatus)
	})
	if err := sub.Unpause(t.Context(), "default", vm.Name, v1.UnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
	console(t, c, vm.Name)
}

// TestOrdinaryStartNoWarnings (#38 item 6): an ordinary start (the tiny VM,
// booted from a kernel-boot container the pod copies in) records no
// Warning event on the VMI or the VM: the node agent waits for the pod's
// files instead of failing its first syncs.
func TestOrdinaryStartNoWarnings(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-no-warnings", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	created, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{vmi.UID, created.UID} {
		events, err := c.Kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				t.Errorf("warning event on %s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
}

// TestErrorUnschedulable (#43 items 3 and 4): a VM asking for 513 sockets
// is admitted, as KubeVirt admits it, and its launcher pod, asking for more
// CPU than the node has, stays unscheduled: printableStatus
// ErrorUnschedulable and the instance's PodScheduled=False on the VM.
func TestErrorUnschedulable(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-513-sockets", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 513, Cores: 1, Threads: 1}
	framework.CreateVM(t, c, vm)
	suite.WaitFor(t, "VM ErrorUnschedulable", 2*time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		scheduled := ""
		for _, cond := range got.Status.Conditions {
			if string(cond.Type) == string(corev1.PodScheduled) {
				scheduled = string(cond.Status) + " " + cond.Reason
			}
		}
		return got.Status.PrintableStatus == v1.VirtualMachineStatusUnschedulable && scheduled == "False Unschedulable",
			fmt.Sprintf("%s, PodScheduled %q", got.Status.PrintableStatus, scheduled)
	})
}

// TestRestartRequired (#38 items 4 and 5): a start records the VM's spec
// in KubeVirt's revision-start-vm-<uid>-<generation>, which the VMI names;
// changing the running VM's CPU gives the VM RestartRequired, and the
// restart clears it, starts from the new generation and deletes the first
// revision.
func TestRestartRequired(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := tinyVM(t, "vm-restart-required", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	created, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := vmcontrolvm.StartRevisionName(created.UID, created.Generation)
	if vmi.Status.VirtualMachineRevisionName != first {
		t.Errorf("VMI status.virtualMachineRevisionName = %q, want %q", vmi.Status.VirtualMachineRevisionName, first)
	}
	if _, err := c.Kube.AppsV1().ControllerRevisions("default").Get(ctx, first, metav1.GetOptions{}); err != nil {
		t.Fatalf("the start revision: %v", err)
	}
	restartRequired := func(want bool) {
		t.Helper()
		suite.WaitFor(t, fmt.Sprintf("VM RestartRequired %v", want), time.Minute, func() (bool, string) {
			got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == v1.VirtualMachineRestartRequired {
					return want && cond.Status == corev1.ConditionTrue && cond.Message == vmcontrolvm.RestartRequiredMessage, fmt.Sprintf("%+v", cond)
				}
			}
			return !want, "no RestartRequired condition"
		})
	}
	patch := []byte(`{"spec":{"template":{"spec":{"domain":{"cpu":{"cores":2}}}}}}`)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	restartRequired(true)
	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Restart(ctx, "default", vm.Name, v1.RestartOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, vm.Name, "restarted and Running", func(got *v1.VirtualMachineInstance) bool {
		return got.UID != vmi.UID && running(got)
	})
	restartRequired(false)
	if smp := qemuSMP(t, vm.Name); !strings.Contains(smp, "cores=2") {
		t.Errorf("the restarted guest's -smp %q, want the new 2 cores", smp)
	}
	if _, err := c.Kube.AppsV1().ControllerRevisions("default").Get(ctx, first, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the first start's revision %s after the restart: %v, want it deleted", first, err)
	}
}
