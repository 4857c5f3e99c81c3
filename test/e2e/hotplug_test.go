package e2e

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// hotplugStatus is the volumeStatus entry of the VMI's volume name, nil
// when there is none.
func hotplugStatus(vmi *v1.VirtualMachineInstance, name string) *v1.VolumeStatus {
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == name {
			return &vmi.Status.VolumeStatus[i]
		}
	}
	return nil
}

// waitVolumeReady waits until the VMI's volume name is Ready and returns
// its target.
func waitVolumeReady(t *testing.T, c *cluster.Cluster, vm, name string) string {
	t.Helper()
	vmi := framework.WaitVMI(t, c, vm, "volume "+name+" Ready", func(vmi *v1.VirtualMachineInstance) bool {
		st := hotplugStatus(vmi, name)
		if st != nil && st.Phase != v1.VolumeReady {
			t.Logf("volume %s: %s %s %s", name, st.Phase, st.Reason, st.Message)
		}
		return st != nil && st.Phase == v1.VolumeReady && st.Target != ""
	})
	return hotplugStatus(vmi, name).Target
}

// waitVolumeGone waits until the VMI's status no longer lists volume name.
func waitVolumeGone(t *testing.T, c *cluster.Cluster, vm, name string) {
	t.Helper()
	framework.WaitVMI(t, c, vm, "volume "+name+" unplugged", func(vmi *v1.VirtualMachineInstance) bool {
		return hotplugStatus(vmi, name) == nil
	})
}

// TestVolumeHotplug (#37 item 1): a claim hot-plugged into a running VM
// with KubeVirt's own `virtctl addvolume` appears in the guest as a SCSI
// disk it writes; `virtctl removevolume` takes it away; the
// same claim added back by editing the VM's template (declarative hotplug)
// appears as a virtio disk holding what the guest wrote. No restart, no
// attachment pod: the node agent mounts the claim straight into the
// launcher. A Block claim goes in and out the same way.
func TestVolumeHotplug(t *testing.T) {
	c := suite.Need(t)
	claim := rwoClaim("hotplug-data", "64Mi")
	createClaim(t, c, claim)
	vm := framework.ExampleVM(t, "vm-net.yaml", "vm-hotplug", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "with an IP", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	ip := vmi.Status.Interfaces[0].IP
	disk := func(q string) string { return framework.GuestURL(ip, 80, "/cgi-bin/disk?"+q) }
	suite.HTTPGetUntil(t, disk("sda"), "no disk /dev/sda", 3*time.Minute)
	pods := func() int {
		list, err := c.Kube.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	// KubeVirt's own virtctl: SCSI, its default bus.
	virtctl := virtctlFor(t, c)
	began := time.Now()
	virtctl.run(t, "Successfully submitted add volume request to VM "+vm.Name, "addvolume", vm.Name, "--volume-name="+claim.Name, "--serial=HOTPLUG1")
	target := waitVolumeReady(t, c, vm.Name, claim.Name)
	attach := time.Since(began)
	marker := fmt.Sprintf("hotplug-%d", time.Now().UnixNano())
	suite.HTTPGetUntil(t, disk(target+"="+marker), "wrote "+marker+" to /dev/"+target, time.Minute)
	inGuest := time.Since(began)
	t.Logf("addvolume → volume Ready (%s) %v, → the guest wrote its disk %v", target, attach.Round(time.Millisecond), inGuest.Round(time.Millisecond))
	if target != "sda" {
		t.Errorf("the SCSI disk's target is %s, want sda", target)
	}
	got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasHotplugVolume(&got.Spec.Template.Spec, claim.Name) {
		t.Errorf("the VM's template lacks the hotplugged volume %s", claim.Name)
	}
	if n := pods(); n != 1 {
		t.Errorf("%d pods of the VMI, want its launcher alone (no attachment pod)", n)
	}
	now, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != vmi.UID {
		t.Fatalf("the VMI was replaced (%s → %s): hotplug restarted the VM", vmi.UID, now.UID)
	}
	if st := hotplugStatus(now, claim.Name); st.HotplugVolume == nil || st.PersistentVolumeClaimInfo == nil || st.PersistentVolumeClaimInfo.ClaimName != claim.Name {
		t.Errorf("volumeStatus of %s: %+v, want hotplugVolume and the claim's info", claim.Name, st)
	}
	waitEvent(t, c, vmi.UID, corev1.EventTypeNormal, "SuccessfulMountVolume")
	for _, cond := range got.Status.Conditions {
		if cond.Type == v1.VirtualMachineRestartRequired && cond.Status == corev1.ConditionTrue {
			t.Errorf("the VM asks for a restart after a hotplug: %s", cond.Message)
		}
	}

	began = time.Now()
	virtctl.run(t, "Successfully submitted remove volume request to VM "+vm.Name, "removevolume", vm.Name, "--volume-name="+claim.Name)
	waitVolumeGone(t, c, vm.Name, claim.Name)
	suite.HTTPGetUntil(t, disk(target), "no disk /dev/"+target, time.Minute)
	waitEvent(t, c, vmi.UID, corev1.EventTypeNormal, "SuccessfulUnmountVolume")
	t.Logf("removevolume → the guest lost /dev/%s %v", target, time.Since(began).Round(time.Millisecond))

	// Declarative: the claim back in the VM's template, on virtio.
	vol := v1.Volume{Name: "again", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}}
	d := v1.Disk{Name: "again", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}
	patch, _ := json.Marshal([]map[string]any{
		{"op": "add", "path": "/spec/template/spec/volumes", "value": []v1.Volume{vol}},
		{"op": "add", "path": "/spec/template/spec/domain/devices/disks", "value": []v1.Disk{d}},
	})
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(t.Context(), vm.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	target = waitVolumeReady(t, c, vm.Name, "again")
	t.Logf("declarative hotplug of the bound claim: template patched → volume Ready (%s) %v", target, time.Since(began).Round(time.Millisecond))
	if !strings.HasPrefix(target, "vd") {
		t.Errorf("the virtio disk's target is %s", target)
	}
	suite.HTTPGetUntil(t, disk(target), marker+"\n", time.Minute)
	t.Logf("declarative hotplug: the guest reads %s back from /dev/%s", marker, target)
	// And out again by the template.
	patch = []byte(`[{"op":"remove","path":"/spec/template/spec/volumes"},{"op":"remove","path":"/spec/template/spec/domain/devices/disks"}]`)
	if _, err := c.Client.KubevirtV1().VirtualMachines("default").Patch(t.Context(), vm.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVolumeGone(t, c, vm.Name, "again")
	suite.HTTPGetUntil(t, disk(target), "no disk /dev/"+target, 2*time.Minute)

	// A Block claim (the node's block volumes): a device node of the
	// launcher's user, allowed in its device cgroup.
	blockClaim := rwoClaim("hotplug-block", "64Mi")
	mode, class := corev1.PersistentVolumeBlock, cluster.BlockStorageClass
	blockClaim.Spec.VolumeMode, blockClaim.Spec.StorageClassName = &mode, &class
	createClaim(t, c, blockClaim)
	began = time.Now()
	virtctl.run(t, "Successfully submitted add volume request to VM "+vm.Name, "addvolume", vm.Name, "--volume-name="+blockClaim.Name)
	target = waitVolumeReady(t, c, vm.Name, blockClaim.Name)
	blockMarker := fmt.Sprintf("block-%d", time.Now().UnixNano())
	suite.HTTPGetUntil(t, disk(target+"="+blockMarker), "wrote "+blockMarker+" to /dev/"+target, time.Minute)
	suite.HTTPGetUntil(t, disk(target), blockMarker+"\n", 30*time.Second)
	t.Logf("Block claim: addvolume → the guest wrote /dev/%s %v", target, time.Since(began).Round(time.Millisecond))
	virtctl.run(t, "Successfully submitted remove volume request to VM "+vm.Name, "removevolume", vm.Name, "--volume-name="+blockClaim.Name)
	waitVolumeGone(t, c, vm.Name, blockClaim.Name)
	suite.HTTPGetUntil(t, disk(target), "no disk /dev/"+target, time.Minute)
}

// tarFileSize is the size of the file name in the tar.gz at path.
func tarFileSize(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return 0, fmt.Errorf("no %s in the archive: %w", name, err)
		}
		if filepath.Base(h.Name) == name {
			n, err := io.Copy(io.Discard, tr)
			return n, err
		}
	}
}

// rwoClaim is a ReadWriteOnce Filesystem claim in default of the default
// StorageClass (local-path-provisioner's).
func rwoClaim(name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func hasHotplugVolume(spec *v1.VirtualMachineInstanceSpec, name string) bool {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name && v1.IsHotpluggable(&spec.Volumes[i]) {
			return true
		}
	}
	return false
}

// TestMemoryDump (#37 item 3): KubeVirt's `virtctl memory-dump get` of a
// running VM onto a claim goes Associating → InProgress → Unmounting →
// Completed with the dump's file name; the file is on the claim, the size
// of the guest's memory; `virtctl memory-dump remove` clears the request.
func TestMemoryDump(t *testing.T) {
	c := suite.Need(t)
	claim := rwoClaim("memory-dump", "300Mi")
	createClaim(t, c, claim)
	vm := tinyVM(t, "vm-dump", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	virtctl := virtctlFor(t, c)
	began := time.Now()
	virtctl.run(t, "", "memory-dump", "get", vm.Name, "--claim-name="+claim.Name)
	var seen []v1.MemoryDumpPhase
	var req *v1.VirtualMachineMemoryDumpRequest
	suite.WaitFor(t, "memory dump Completed", 3*time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		req = got.Status.MemoryDumpRequest
		if req == nil {
			return false, "no memoryDumpRequest"
		}
		if len(seen) == 0 || seen[len(seen)-1] != req.Phase {
			seen = append(seen, req.Phase)
		}
		if req.Phase == v1.MemoryDumpFailed {
			t.Fatalf("memory dump failed: %s", req.Message)
		}
		return req.Phase == v1.MemoryDumpCompleted, fmt.Sprintf("%s %s", req.Phase, req.Message)
	})
	t.Logf("memory-dump get → Completed %v, phases seen %v, file %s", time.Since(began).Round(time.Millisecond), seen, *req.FileName)
	if req.FileName == nil || !strings.HasPrefix(*req.FileName, vm.Name+"-"+claim.Name+"-") || !strings.HasSuffix(*req.FileName, ".memory.dump") ||
		req.StartTimestamp == nil || req.EndTimestamp == nil {
		t.Errorf("completed request: %+v", req)
	}
	// The claim names the dump (KubeVirt's kubevirt.io/memory-dump).
	if got, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), claim.Name, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if req.FileName != nil && got.Annotations[v1.PVCMemoryDumpAnnotation] != *req.FileName {
		t.Errorf("claim %s's %s annotation is %q, want %q", claim.Name, v1.PVCMemoryDumpAnnotation, got.Annotations[v1.PVCMemoryDumpAnnotation], *req.FileName)
	}
	now, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != vmi.UID || hotplugStatus(now, claim.Name) != nil || len(now.Spec.Volumes) != len(vmi.Spec.Volumes) {
		t.Errorf("after the dump the instance (%s, was %s) still has the dump volume: status %+v, %d volumes (was %d)",
			now.UID, vmi.UID, hotplugStatus(now, claim.Name), len(now.Spec.Volumes), len(vmi.Spec.Volumes))
	}
	// The dump is on the claim: a raw dump of the 128Mi guest.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "memory-dump-check", Namespace: "default"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr(int32(0)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "check", Image: cluster.BusyboxImage + ":" + c.Tag, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"sh", "-c", fmt.Sprintf("ls -l /dump && test $(stat -c %%s /dump/%s) -ge %d", *req.FileName, 128<<20)},
				VolumeMounts: []corev1.VolumeMount{{Name: "dump", MountPath: "/dump"}}}},
			Volumes: []corev1.Volume{{Name: "dump", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}},
		}}},
	}
	runJob(t, c, job)
	// virtctl downloads it through a VirtualMachineExport of the claim
	// (a claim of files: a tar.gz of its root, as on KubeVirt).
	out := filepath.Join(t.TempDir(), "dump.tar.gz")
	began = time.Now()
	virtctl.run(t, "Download finished succesfully", "memory-dump", "download", vm.Name, "--output="+out, "--port-forward")
	t.Logf("virtctl memory-dump download: %v", time.Since(began).Round(time.Millisecond))
	if size, err := tarFileSize(out, *req.FileName); err != nil || size < 128<<20 {
		t.Errorf("the downloaded archive holds %s of %d bytes (%v), want the 128Mi guest's memory", *req.FileName, size, err)
	}
	waitExportGone(t, c, "export-"+vm.Name+"-"+claim.Name) // virtctl deletes the export it made
	virtctl.run(t, "", "memory-dump", "remove", vm.Name)
	suite.WaitFor(t, "memoryDumpRequest cleared", time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.MemoryDumpRequest == nil, fmt.Sprintf("%+v", got.Status.MemoryDumpRequest)
	})
}
