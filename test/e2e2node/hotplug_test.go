package e2e2node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestHotplugLiveMigration (#37): a VM whose disk is a claim of the shared
// StorageClass (ReadWriteMany, what a VM's claims must be to migrate) gets
// a second shared claim hot-plugged by an edit of its template, and the
// guest writes both disks. The VMI stays LiveMigratable and migrates to
// the other node: the target's node agent mounted the hot-plugged claim
// into the target launcher before the guest moved, so the guest reads both
// disks back there, writes the hot-plugged one again, and the volume is
// Ready on the new node. Unplugged there, the guest loses it.
func TestHotplugLiveMigration(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	for _, name := range []string{"shared-disk", "shared-hotplug"} {
		createSharedClaim(t, c, name, "32Mi")
	}
	vm := netVM(t, "vm-hpmig", c.Env.Nodes[0].Name)
	vm.Spec.Template.Spec.NodeSelector = nil // it must be free to move
	vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks,
		v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared-disk"}}}})
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running with an IP", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	uid, source, ip := vmi.UID, vmi.Status.NodeName, vmi.Status.Interfaces[0].IP
	disk := func(ip, q string) string { return guestURL(ip, "/cgi-bin/disk?"+q) }
	suite.HTTPGetUntil(t, guestURL(ip, "/"), "vmkit guest "+vm.Name, 90*time.Second)
	stamp := time.Now().UnixNano()
	dataMarker, hotMarker, afterMarker := fmt.Sprintf("claim-%d", stamp), fmt.Sprintf("hotplug-%d", stamp), fmt.Sprintf("after-%d", stamp)
	suite.HTTPGetUntil(t, disk(ip, "vda="+dataMarker), "wrote "+dataMarker, 30*time.Second)

	// Declarative hotplug: the claim joins the VM's template on SCSI.
	patchVM(t, c, vm.Name, []map[string]any{
		{"op": "add", "path": "/spec/template/spec/volumes/-", "value": v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{Hotpluggable: true,
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared-hotplug"}}}}},
		{"op": "add", "path": "/spec/template/spec/domain/devices/disks/-", "value": v1.Disk{Name: "hp", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}}},
	})
	target := waitHotplugReady(t, c, vm.Name, "hp", "")
	suite.HTTPGetUntil(t, disk(ip, target+"="+hotMarker), "wrote "+hotMarker+" to /dev/"+target, time.Minute)
	framework.WaitVMI(t, c, vm.Name, "LiveMigratable", func(v *v1.VirtualMachineInstance) bool {
		cond := v.VMICondition(v1.VirtualMachineInstanceIsMigratable)
		if cond != nil && cond.Status != corev1.ConditionTrue {
			t.Logf("LiveMigratable %s: %s %s", cond.Status, cond.Reason, cond.Message)
		}
		return cond != nil && cond.Status == corev1.ConditionTrue
	})

	began := time.Now()
	migrate(t, c, "mig-hotplug", vm.Name, true)
	v := framework.WaitVMI(t, c, vm.Name, "on the other node with its new pod's IP", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.NodeName != source && v.Status.Phase == v1.Running && len(v.Status.Interfaces) > 0 &&
			v.Status.Interfaces[0].IP != "" && v.Status.Interfaces[0].IP != ip
	})
	if v.UID != uid {
		t.Fatalf("the VMI was replaced (%s → %s)", uid, v.UID)
	}
	newIP := v.Status.Interfaces[0].IP
	suite.HTTPGetUntil(t, disk(newIP, "vda"), dataMarker+"\n", 90*time.Second)
	suite.HTTPGetUntil(t, disk(newIP, target), hotMarker+"\n", 30*time.Second)
	t.Logf("migrated %s → %s in %v with a hot-plugged claim; the guest reads both disks back", source, v.Status.NodeName, time.Since(began).Round(time.Millisecond))
	if got := waitHotplugReady(t, c, vm.Name, "hp", v.Status.NodeName); got != target {
		t.Errorf("after the migration the hot-plugged disk is %s, was %s", got, target)
	}
	// The target's QEMU writes the shared claim.
	suite.HTTPGetUntil(t, disk(newIP, target+"="+afterMarker), "wrote "+afterMarker, 30*time.Second)
	suite.HTTPGetUntil(t, disk(newIP, target), afterMarker+"\n", 30*time.Second)

	// Unplugged on the new node.
	got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := &got.Spec.Template.Spec
	patchVM(t, c, vm.Name, []map[string]any{
		{"op": "test", "path": fmt.Sprintf("/spec/template/spec/volumes/%d/name", len(spec.Volumes)-1), "value": "hp"},
		{"op": "remove", "path": fmt.Sprintf("/spec/template/spec/volumes/%d", len(spec.Volumes)-1)},
		{"op": "test", "path": fmt.Sprintf("/spec/template/spec/domain/devices/disks/%d/name", len(spec.Domain.Devices.Disks)-1), "value": "hp"},
		{"op": "remove", "path": fmt.Sprintf("/spec/template/spec/domain/devices/disks/%d", len(spec.Domain.Devices.Disks)-1)},
	})
	framework.WaitVMI(t, c, vm.Name, "volume hp unplugged", func(v *v1.VirtualMachineInstance) bool {
		for _, vs := range v.Status.VolumeStatus {
			if vs.Name == "hp" {
				return false
			}
		}
		return true
	})
	suite.HTTPGetUntil(t, disk(newIP, target), "no disk /dev/"+target, time.Minute)
}

// createSharedClaim creates a ReadWriteMany Filesystem claim of the shared
// StorageClass in default and deletes it when the test ends (after the
// VMs the test creates later are gone), waiting until its volume and
// directory are.
func createSharedClaim(t *testing.T, c *cluster.Cluster, name, size string) {
	t.Helper()
	class := cluster.SharedStorageClass
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		bound, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("claim %s: %v", name, err)
			return
		}
		if err := c.Kube.CoreV1().PersistentVolumeClaims("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting claim %s: %v", name, err)
		}
		if bound.Spec.VolumeName == "" {
			return
		}
		pv, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, bound.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.HostPath == nil {
			t.Errorf("the volume of claim %s: %v %+v", name, err, pv)
			return
		}
		suite.WaitFor(t, "shared volume "+pv.Name+" and its directory gone", 2*time.Minute, func() (bool, string) {
			_, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			_, serr := os.Stat(pv.Spec.HostPath.Path)
			return apierrors.IsNotFound(err) && os.IsNotExist(serr), fmt.Sprintf("volume: %v, directory: %v", err, serr)
		})
	})
	suite.WaitFor(t, "claim "+name+" Bound to a volume without node affinity", time.Minute, func() (bool, string) {
		got, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if got.Status.Phase != corev1.ClaimBound {
			return false, string(got.Status.Phase)
		}
		pv, err := c.Kube.CoreV1().PersistentVolumes().Get(t.Context(), got.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if pv.Spec.NodeAffinity != nil {
			t.Fatalf("the shared volume %s is bound to nodes: %+v", pv.Name, pv.Spec.NodeAffinity)
		}
		return true, ""
	})
}

// patchVM applies a JSON patch to VM default/name.
func patchVM(t *testing.T, c *cluster.Cluster, name string, ops []map[string]any) {
	t.Helper()
	patch, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(t.Context(), name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitHotplugReady waits until the VMI's hot-plugged volume name is Ready
// (on node, when not empty) and returns its target.
func waitHotplugReady(t *testing.T, c *cluster.Cluster, vm, name, node string) string {
	t.Helper()
	target := ""
	framework.WaitVMI(t, c, vm, "volume "+name+" Ready", func(vmi *v1.VirtualMachineInstance) bool {
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.Name != name {
				continue
			}
			if vs.Phase != v1.VolumeReady {
				t.Logf("volume %s: %s %s %s", name, vs.Phase, vs.Reason, vs.Message)
			}
			target = vs.Target
			return vs.HotplugVolume != nil && vs.Phase == v1.VolumeReady && vs.Target != "" && (node == "" || vmi.Status.NodeName == node)
		}
		return false
	})
	return target
}
