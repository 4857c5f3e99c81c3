package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestSnapshotRestore (#37 item 5): KubeVirt's snapshot and restore
// manifests, applied with kubectl, on a VM with a claim of the local
// StorageClass, which cannot snapshot volumes:
//   - the VM's status.volumeSnapshotStatuses says so for each volume, with
//     KubeVirt's reasons;
//   - a snapshot of the running VM succeeds with every volume excluded,
//     the Online indication and a content holding the VM's spec, and
//     releases the VM (snapshotInProgress, finalizer);
//   - after the VM's template changed and it stopped, a restore puts the
//     snapshot's template back (keeping the run strategy) and completes; a
//     restore to a VM that does not exist creates it, halted, with its patches;
//   - the claim keeps what the guest wrote (a restore does not touch
//     excluded volumes); deleting the snapshot deletes its content.
func TestSnapshotRestore(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm, claim, _, marker := claimVM(t, c, "vm-snap", "snapshot-data")

	pvc, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := waitVM(t, c, vm.Name, "status.volumeSnapshotStatuses", func(vm *v1.VirtualMachine) bool { return len(vm.Status.VolumeSnapshotStatuses) > 0 })
	for _, st := range stored.Status.VolumeSnapshotStatuses {
		want := fmt.Sprintf("Snapshot is not supported for this volumeSource type [%s]", st.Name)
		if st.Name == "datadisk" {
			want = fmt.Sprintf("No VolumeSnapshotClass: Volume snapshots are not configured for this StorageClass [%s] [datadisk]", *pvc.Spec.StorageClassName)
		}
		if st.Enabled || st.Reason != want {
			t.Errorf("volumeSnapshotStatuses: %+v, want disabled with %q", st, want)
		}
	}

	dir := t.TempDir()
	kubectl := kubectlFor(t, c)
	apply := func(name, manifest string) {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl.run(t, "created", "-n", "default", "create", "-f", path)
	}
	snaps := c.Client.SnapshotV1beta1()
	t.Cleanup(func() {
		// t.Context() has ended when cleanups run.
		bg := context.Background()
		for _, r := range []string{"restore-snap", "restore-copy"} {
			_ = snaps.VirtualMachineRestores("default").Delete(bg, r, metav1.DeleteOptions{})
		}
		_ = snaps.VirtualMachineSnapshots("default").Delete(bg, "snap-vm", metav1.DeleteOptions{})
		if err := c.Client.KubevirtV1().VirtualMachines("default").Delete(bg, "vm-snap-copy", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the VM the restore created: %v", err)
		}
	})
	began := time.Now()
	apply("snapshot", `apiVersion: snapshot.kubevirt.io/v1beta1
kind: VirtualMachineSnapshot
metadata:
  name: snap-vm
spec:
  source:
    apiGroup: kubevirt.io
    kind: VirtualMachine
    name: vm-snap
`)
	var snap *snapshotv1.VirtualMachineSnapshot
	suite.WaitFor(t, "snapshot snap-vm Succeeded", 2*time.Minute, func() (bool, string) {
		snap, err = snaps.VirtualMachineSnapshots("default").Get(ctx, "snap-vm", metav1.GetOptions{})
		if err != nil || snap.Status == nil {
			return false, fmt.Sprint(err)
		}
		return snap.Status.Phase == snapshotv1.Succeeded, fmt.Sprintf("%s %+v", snap.Status.Phase, snap.Status.Conditions)
	})
	t.Logf("snapshot of the running VM Succeeded %v after create", time.Since(began).Round(time.Millisecond))
	st := snap.Status
	if st.ReadyToUse == nil || !*st.ReadyToUse || st.SourceUID == nil || *st.SourceUID != stored.UID || st.CreationTime == nil ||
		!slices.Contains(st.Indications, snapshotv1.VMSnapshotOnlineSnapshotIndication) || st.SnapshotVolumes == nil ||
		len(st.SnapshotVolumes.IncludedVolumes) != 0 || !slices.Contains(st.SnapshotVolumes.ExcludedVolumes, "datadisk") {
		t.Errorf("snapshot status: %+v", st)
	}
	content, err := snaps.VirtualMachineSnapshotContents("default").Get(ctx, *st.VirtualMachineSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if content.Name != "vmsnapshot-content-"+string(snap.UID) || content.Spec.Source.VirtualMachine == nil ||
		content.Spec.Source.VirtualMachine.Name != vm.Name || len(content.Spec.VolumeBackups) != 0 {
		t.Errorf("content %s: %+v", content.Name, content.Spec)
	}
	waitVM(t, c, vm.Name, "released by the snapshot", func(vm *v1.VirtualMachine) bool {
		return vm.Status.SnapshotInProgress == nil && !slices.Contains(vm.Finalizers, "snapshot.kubevirt.io/snapshot-source-protection")
	})

	// The template changes, the VM stops; the restore brings the template
	// back. The controllers write the VM's status meanwhile: read it again
	// on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current.Spec.Template.ObjectMeta.Annotations == nil {
			current.Spec.Template.ObjectMeta.Annotations = map[string]string{}
		}
		current.Spec.Template.ObjectMeta.Annotations["vmkit.test/after-snapshot"] = "true"
		current.Spec.RunStrategy = ptr(v1.RunStrategyHalted)
		_, err = c.Client.KubevirtV1().VirtualMachines("default").Update(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitNoVMI(t, c, vm.Name)
	began = time.Now()
	apply("restore", `apiVersion: snapshot.kubevirt.io/v1beta1
kind: VirtualMachineRestore
metadata:
  name: restore-snap
spec:
  target:
    apiGroup: kubevirt.io
    kind: VirtualMachine
    name: vm-snap
  virtualMachineSnapshotName: snap-vm
`)
	waitRestore(t, c, "restore-snap")
	t.Logf("restore of the stopped VM complete %v after create", time.Since(began).Round(time.Millisecond))
	restored := waitVM(t, c, vm.Name, "restored", func(vm *v1.VirtualMachine) bool { return vm.Status.RestoreInProgress == nil })
	if _, changed := restored.Spec.Template.ObjectMeta.Annotations["vmkit.test/after-snapshot"]; changed ||
		restored.Spec.RunStrategy == nil || *restored.Spec.RunStrategy != v1.RunStrategyHalted ||
		restored.Annotations["restore.kubevirt.io/lastRestoreUID"] == "" {
		t.Errorf("the restored VM: template annotations %v, runStrategy %v, annotations %v",
			restored.Spec.Template.ObjectMeta.Annotations, restored.Spec.RunStrategy, restored.Annotations)
	}

	// A restore to a VM that does not exist creates it, halted and patched.
	apply("restore-copy", `apiVersion: snapshot.kubevirt.io/v1beta1
kind: VirtualMachineRestore
metadata:
  name: restore-copy
spec:
  target:
    apiGroup: kubevirt.io
    kind: VirtualMachine
    name: vm-snap-copy
  virtualMachineSnapshotName: snap-vm
  patches:
  - '{"op": "replace", "path": "/metadata/name", "value": "vm-snap-copy"}'
  - '{"op": "add", "path": "/metadata/annotations/copy", "value": "yes"}'
`)
	waitRestore(t, c, "restore-copy")
	copyVM, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, "vm-snap-copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if copyVM.Spec.RunStrategy == nil || *copyVM.Spec.RunStrategy != v1.RunStrategyHalted || copyVM.Annotations["copy"] != "yes" ||
		len(copyVM.Spec.Template.Spec.Volumes) != len(vm.Spec.Template.Spec.Volumes) {
		t.Errorf("the VM the restore created: runStrategy %v, annotations %v, %d volumes", copyVM.Spec.RunStrategy, copyVM.Annotations, len(copyVM.Spec.Template.Spec.Volumes))
	}

	// The claim was not part of the snapshot: the guest finds its data.
	setRunStrategy(t, c, vm.Name, v1.RunStrategyAlways)
	vmi := framework.WaitVMI(t, c, vm.Name, "running again with an IP", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	suite.HTTPGetUntil(t, framework.GuestURL(vmi.Status.Interfaces[0].IP, 80, "/cgi-bin/disk?vda"), marker+"\n", time.Minute)

	if err := snaps.VirtualMachineSnapshots("default").Delete(ctx, "snap-vm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.WaitFor(t, "the snapshot and its content deleted", time.Minute, func() (bool, string) {
		_, errSnap := snaps.VirtualMachineSnapshots("default").Get(ctx, "snap-vm", metav1.GetOptions{})
		_, errContent := snaps.VirtualMachineSnapshotContents("default").Get(ctx, content.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(errSnap) && apierrors.IsNotFound(errContent), fmt.Sprint(errSnap, errContent)
	})
}

func waitVM(t *testing.T, c *cluster.Cluster, name, what string, ok func(*v1.VirtualMachine) bool) *v1.VirtualMachine {
	t.Helper()
	var vm *v1.VirtualMachine
	suite.WaitFor(t, "VM "+name+" "+what, 2*time.Minute, func() (bool, string) {
		var err error
		vm, err = c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ok(vm), fmt.Sprintf("%+v", vm.Status)
	})
	return vm
}

func waitRestore(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	suite.WaitFor(t, "restore "+name+" complete", 2*time.Minute, func() (bool, string) {
		r, err := c.Client.SnapshotV1beta1().VirtualMachineRestores("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || r.Status == nil {
			return false, fmt.Sprint(err)
		}
		return r.Status.Complete != nil && *r.Status.Complete, fmt.Sprintf("%+v", r.Status.Conditions)
	})
}
