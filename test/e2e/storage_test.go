package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// pvcExample reads examples/vm-pvc.yaml: the claim, the Job that fills it
// and the VM, in that order.
func pvcExample(t testing.TB) (*corev1.PersistentVolumeClaim, *batchv1.Job, *v1.VirtualMachine) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "vm-pvc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	if len(docs) != 3 {
		t.Fatalf("examples/vm-pvc.yaml holds %d documents, want the claim, the Job and the VM", len(docs))
	}
	claim, job, vm := &corev1.PersistentVolumeClaim{}, &batchv1.Job{}, &v1.VirtualMachine{}
	for i, obj := range []any{claim, job, vm} {
		if err := yaml.UnmarshalStrict(docs[i], obj); err != nil {
			t.Fatalf("examples/vm-pvc.yaml, document %d: %v", i+1, err)
		}
	}
	claim.Namespace, job.Namespace, vm.Namespace = "default", "default", "default"
	return claim, job, vm
}

// createClaim creates a claim and, when the test ends (after its VMs are
// gone), deletes it and waits until it is gone. A provisioned volume must
// go with it (local-path-provisioner's helper pod removes its directory);
// a block volume of the node is retained and made Available again (the
// documented way to reuse a retained local volume, docs/cluster.md).
func createClaim(t testing.TB, c *cluster.Cluster, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pvc, err := c.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("claim %s: %v", claim.Name, err)
			return
		}
		if err := c.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting claim %s: %v", claim.Name, err)
			return
		}
		pv := pvc.Spec.VolumeName
		suite.WaitFor(t, "claim "+claim.Name+" gone", 2*time.Minute, func() (bool, string) {
			_, err := c.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		if pv == "" {
			return
		}
		if strings.HasPrefix(pv, cluster.BlockVolumePrefix) {
			suite.WaitFor(t, "PersistentVolume "+pv+" Released", time.Minute, func() (bool, string) {
				v, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return v.Status.Phase == corev1.VolumeReleased, string(v.Status.Phase)
			})
			patch := []byte(`[{"op": "remove", "path": "/spec/claimRef"}]`)
			if _, err := c.Kube.CoreV1().PersistentVolumes().Patch(ctx, pv, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("making %s Available again: %v", pv, err)
			}
			return
		}
		suite.WaitFor(t, "provisioned PersistentVolume "+pv+" deleted with its claim", 2*time.Minute, func() (bool, string) {
			v, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
			if err != nil {
				return apierrors.IsNotFound(err), err.Error()
			}
			return false, string(v.Status.Phase)
		})
	})
}

// runJob runs a Job to completion and deletes it with its pods.
func runJob(t testing.TB, c *cluster.Cluster, job *batchv1.Job) {
	t.Helper()
	jobs := c.Kube.BatchV1().Jobs(job.Namespace)
	if _, err := jobs.Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		background := metav1.DeletePropagationBackground
		if err := jobs.Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Errorf("deleting Job %s: %v", job.Name, err)
		}
	}()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j, err := jobs.Get(t.Context(), job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cond := range j.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				return
			case batchv1.JobFailed:
				t.Fatalf("Job %s failed: %s: %s\n%s", job.Name, cond.Reason, cond.Message, c.PodLogs(t.Context(), job.Namespace, "job-name="+job.Name, 20))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Job %s not complete after 3 minutes: %+v\n%s\n%s", job.Name, j.Status, c.PodLogs(t.Context(), job.Namespace, "job-name="+job.Name, 20),
				c.PodLogs(t.Context(), cluster.StorageNamespace, "", 20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// addDataDisk gives vm a second virtio disk, datadisk (/dev/vdb in the
// guest), on claim.
func addDataDisk(vm *v1.VirtualMachine, claim string) {
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{
		Name: "datadisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: "datadisk", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}})
}

// pvcVMs creates the claims of the storage tests and fills them, and
// returns their VMs (not created yet): examples/vm-pvc.yaml as it is (a
// Filesystem claim of the default StorageClass, provisioned by
// local-path-provisioner, filled with the tiny guest's disk as disk.img by
// the example's Job), and the same VM on a Block claim of the node's local
// block volumes (filled with dd). Each VM has a second claim of its kind as
// a data disk, /dev/vdb in the guest: a Filesystem claim left empty (the
// launcher creates its disk.img, as KubeVirt's does), a blank device.
func pvcVMs(t testing.TB, c *cluster.Cluster) (fsVM, blockVM *v1.VirtualMachine) {
	t.Helper()
	ctx := t.Context()
	fsClaim, fill, fsVM := pvcExample(t)
	if fsClaim.Spec.StorageClassName != nil || fsVM.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim == nil {
		t.Fatal("examples/vm-pvc.yaml must boot from a claim on the default StorageClass")
	}
	block := corev1.PersistentVolumeBlock
	blockClass := cluster.BlockStorageClass
	claimOf := func(name string, mode *corev1.PersistentVolumeMode, class *string, size string) *corev1.PersistentVolumeClaim {
		pvc := fsClaim.DeepCopy()
		pvc.Name, pvc.Spec.VolumeMode, pvc.Spec.StorageClassName = name, mode, class
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
		return pvc
	}
	fsData := claimOf(fsDataClaim, nil, nil, "16Mi")
	blockClaim := claimOf("vm-pvc-block-disk", &block, &blockClass, "64Mi")
	blockData := claimOf("vm-pvc-block-data", &block, &blockClass, "16Mi")
	for _, pvc := range []*corev1.PersistentVolumeClaim{fsClaim, fsData, blockClaim, blockData} {
		createClaim(t, c, pvc)
	}

	// Fill: the example's Job; dd to the device for the Block root claim.
	// The Filesystem data claim stays empty.
	began := time.Now()
	runJob(t, c, fill)
	blockJob := fill.DeepCopy()
	blockJob.Name = "vm-pvc-fill-block"
	pod := &blockJob.Spec.Template.Spec
	pod.Volumes[1].PersistentVolumeClaim.ClaimName = blockClaim.Name
	pod.Containers[0].VolumeMounts = pod.Containers[0].VolumeMounts[:1]
	pod.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "pvc", DevicePath: "/dev/pvc"}}
	pod.Containers[0].Command = []string{"/tools/busybox", "dd", "if=/disk/tiny.img", "of=/dev/pvc", "bs=1M", "conv=fsync"}
	pod.Containers[0].SecurityContext = nil // the node's device is root's: dd as root
	runJob(t, c, blockJob)
	t.Logf("claims filled in %v", time.Since(began).Round(time.Millisecond))

	// What the claims are bound to: a directory the provisioner made in the
	// node's storage, and a local block device of the node.
	for _, pvc := range []*corev1.PersistentVolumeClaim{fsClaim, blockClaim} {
		got, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, got.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim %s (%s) is bound to no volume: %v", pvc.Name, got.Status.Phase, err)
		}
		switch {
		case pvc.Spec.VolumeMode == nil:
			if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, c.Env.Node.StorageDir+"/") {
				t.Errorf("claim %s is bound to %s, not a directory under the node's storage %s: %+v", pvc.Name, pv.Name, c.Env.Node.StorageDir, pv.Spec.PersistentVolumeSource)
			}
		case pv.Spec.Local == nil || !strings.HasPrefix(pv.Name, cluster.BlockVolumePrefix):
			t.Errorf("claim %s is bound to %s, not a local block volume: %+v", pvc.Name, pv.Name, pv.Spec.PersistentVolumeSource)
		}
	}

	fsVM.Spec.RunStrategy = ptr(v1.RunStrategyAlways)
	addDataDisk(fsVM, fsData.Name)
	blockVM = fsVM.DeepCopy()
	blockVM.Name = "vm-pvc-block"
	blockVM.Spec.Template.ObjectMeta.Labels["kubevirt.io/vm"] = blockVM.Name
	blockVM.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = blockClaim.Name
	blockVM.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName = blockData.Name
	return fsVM, blockVM
}

// bootedIP waits until vm's VMI is Running and its guest answers HTTP, and
// returns the guest's IP.
func bootedIP(t testing.TB, c *cluster.Cluster, vm *v1.VirtualMachine) string {
	t.Helper()
	framework.WaitVMI(t, c, vm.Name, "Running", running)
	vmi := framework.WaitVMI(t, c, vm.Name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
		return len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	ip := vmi.Status.Interfaces[0].IP
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/"), "vmkit guest "+vm.Name, 3*time.Minute)
	return ip
}

// TestPVCDisks: the default StorageClass is the provisioner's; the VMs of
// pvcVMs boot from their claims (SYSLINUX on the console, HTTP from the
// guest) with the claims attached to their launcher pods as KubeVirt's
// are; each guest writes a marker to its data disk, and after a stop and
// a start (a new VMI and launcher pod) reads it back. Then the Filesystem
// VM's data claim becomes an ephemeral volume: the guest reads the marker
// and overwrites it, and the claim's image still holds it afterwards.
func TestPVCDisks(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()

	classes, err := c.Kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, sc := range classes.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			defaults = append(defaults, sc.Name+" ("+sc.Provisioner+")")
		}
	}
	if want := []string{cluster.DefaultStorageClass + " (rancher.io/local-path)"}; !slices.Equal(defaults, want) {
		t.Fatalf("default StorageClasses %q, want %q", defaults, want)
	}

	fsVM, blockVM := pvcVMs(t, c)
	vms := []*v1.VirtualMachine{fsVM, blockVM}
	began := time.Now()
	for _, vm := range vms {
		framework.CreateVM(t, c, vm)
	}
	ips := map[string]string{}
	for _, vm := range vms {
		ips[vm.Name] = bootedIP(t, c, vm)
		t.Logf("%s: the guest booted from its claim answers HTTP %v after create", vm.Name, time.Since(began).Round(time.Millisecond))
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		lines, err := c.Console(cctx, "default", vm.Name, guestMarker)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "SYSLINUX") }) {
			t.Errorf("%s: the console shows no SYSLINUX line (not booted from its claim's disk?): %q", vm.Name, lines)
		}
	}
	// The launcher pods attach the claims as KubeVirt's do.
	for _, vm := range vms {
		vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		compute := launcherPod(t, c, vmi).Spec.Containers[0]
		if vm == blockVM {
			if !slices.ContainsFunc(compute.VolumeDevices, func(d corev1.VolumeDevice) bool { return d.DevicePath == "/dev/rootdisk" }) {
				t.Errorf("%s: the compute container has no device /dev/rootdisk: %+v", vm.Name, compute.VolumeDevices)
			}
		} else if !slices.ContainsFunc(compute.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == "/var/run/kubevirt-private/vmi-disks/rootdisk"
		}) {
			t.Errorf("%s: the compute container does not mount the claim at vmi-disks/rootdisk: %+v", vm.Name, compute.VolumeMounts)
		}
	}

	// The empty Filesystem data claim: the VMI reports the claim, and the
	// launcher made its disk.img from it.
	vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, fsVM.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkClaimInfo(t, vmi, "datadisk", fsDataClaim, "16Mi")
	img := claimImage(t, c, fsDataClaim)
	created := checkCreatedImage(t, img, 16<<20)

	// The guests write to their data disks; the data outlives the VMIs.
	markers := map[string]string{}
	for _, vm := range vms {
		markers[vm.Name] = fmt.Sprintf("%s-%d", vm.Name, time.Now().UnixNano())
		suite.HTTPGetUntil(t, framework.GuestURL(ips[vm.Name], 80, "/cgi-bin/disk?vdb="+markers[vm.Name]), "wrote "+markers[vm.Name]+" to /dev/vdb", time.Minute)
		setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	}
	// The guest's /dev/vdb is the created disk.img: the marker is its first line.
	if data, err := os.ReadFile(img); err != nil || !bytes.HasPrefix(data, []byte(markers[fsVM.Name]+"\n")) {
		t.Errorf("%s does not begin with the marker %q the guest wrote to /dev/vdb (%v)", img, markers[fsVM.Name], err)
	}
	for _, vm := range vms {
		waitNoVMI(t, c, vm.Name)
		setRunStrategy(t, c, vm.Name, v1.RunStrategyAlways)
	}
	for _, vm := range vms {
		ip := bootedIP(t, c, vm)
		body := suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vdb"), markers[vm.Name], time.Minute)
		t.Logf("%s: after stop and start the guest reads %q from its data disk", vm.Name, strings.TrimSpace(body))
	}
	// The second launcher used the image as it was: same file, same size.
	if again := checkCreatedImage(t, img, 16<<20); again.Ino != created.Ino {
		t.Errorf("%s was replaced after the restart: inode %d, was %d", img, again.Ino, created.Ino)
	}

	// The same claim as an ephemeral volume: the guest reads the claim's
	// marker through a copy-on-write overlay and writes only the overlay,
	// so the claim's image keeps the marker after the VM stops.
	setRunStrategy(t, c, fsVM.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, fsVM.Name)
	// The VM controller may still be writing the stopped VM's status: an
	// update from a stale read conflicts, and is read and made again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		stored, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, fsVM.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		data := volumeNamed(t, &stored.Spec.Template.Spec, "datadisk")
		data.VolumeSource = v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{PersistentVolumeClaim: &data.PersistentVolumeClaim.PersistentVolumeClaimVolumeSource}}
		stored.Spec.RunStrategy = ptr(v1.RunStrategyAlways)
		_, err = c.Client.KubevirtV1().VirtualMachines("default").Update(ctx, stored, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ip := bootedIP(t, c, fsVM)
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vdb"), markers[fsVM.Name]+"\n", time.Minute)
	scratch := fmt.Sprintf("overlay-%d", time.Now().UnixNano())
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vdb="+scratch), "wrote "+scratch+" to /dev/vdb", time.Minute)
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vdb"), scratch+"\n", 30*time.Second)
	setRunStrategy(t, c, fsVM.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, fsVM.Name)
	if got, err := os.ReadFile(img); err != nil || !bytes.HasPrefix(got, []byte(markers[fsVM.Name]+"\n")) {
		t.Errorf("%s lost its marker %q after the guest wrote %q to the ephemeral volume (%v)", img, markers[fsVM.Name], scratch, err)
	}
}

// fsDataClaim is pvcVMs' empty Filesystem data claim.
const fsDataClaim = "vm-pvc-data"

// checkClaimInfo checks status.volumeStatus of volume: the claim's
// persistentVolumeClaimInfo as KubeVirt's VMI controller reports it for a
// Filesystem claim of the given size (local-path-provisioner's volumes have
// the capacity asked for).
func checkClaimInfo(t testing.TB, vmi *v1.VirtualMachineInstance, volume, claim, size string) {
	t.Helper()
	i := slices.IndexFunc(vmi.Status.VolumeStatus, func(s v1.VolumeStatus) bool { return s.Name == volume })
	if i < 0 || vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo == nil {
		t.Errorf("VMI %s: no persistentVolumeClaimInfo for volume %s in status.volumeStatus %+v", vmi.Name, volume, vmi.Status.VolumeStatus)
		return
	}
	info := vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo
	q := resource.MustParse(size)
	if info.ClaimName != claim || info.Capacity.Storage().Cmp(q) != 0 || info.Requests.Storage().Cmp(q) != 0 ||
		!slices.Equal(info.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) ||
		info.VolumeMode == nil || *info.VolumeMode != corev1.PersistentVolumeFilesystem ||
		info.FilesystemOverhead == nil || *info.FilesystemOverhead != "0.055" {
		t.Errorf("VMI %s volume %s: persistentVolumeClaimInfo %+v; want claim %s, capacity and requests %s, ReadWriteOnce, Filesystem, overhead 0.055",
			vmi.Name, volume, info, claim, size)
	}
}

// claimImage is the node's path of the disk.img in a Filesystem claim
// (local-path-provisioner's volumes are directories of the node).
func claimImage(t testing.TB, c *cluster.Cluster, claim string) string {
	t.Helper()
	pvc, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.Kube.CoreV1().PersistentVolumes().Get(t.Context(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %s: %v", claim, err)
	}
	if pv.Spec.HostPath == nil {
		t.Fatalf("claim %s is bound to %s, not a directory of the node: %+v", claim, pv.Name, pv.Spec.PersistentVolumeSource)
	}
	return filepath.Join(pv.Spec.HostPath.Path, "disk.img")
}

// checkCreatedImage checks a disk.img the launcher created: a sparse raw
// file of size bytes, 0660, the qemu user's (107).
func checkCreatedImage(t testing.TB, img string, size int64) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatalf("the launcher created no disk.img in the empty claim: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Size() != size || fi.Mode().Perm() != 0o660 || st.Uid != 107 || st.Blocks*512 >= size {
		t.Errorf("%s: %d bytes (%d allocated), mode %v, owner %d:%d; want %d bytes, sparse, 0660, the qemu user 107",
			img, fi.Size(), st.Blocks*512, fi.Mode().Perm(), st.Uid, st.Gid, size)
	}
	t.Logf("%s: %d bytes, %d allocated, mode %v, owner %d:%d", img, fi.Size(), st.Blocks*512, fi.Mode().Perm(), st.Uid, st.Gid)
	return st
}

// waitVMReady waits until the VM reports the condition Ready.
func waitVMReady(t testing.TB, c *cluster.Cluster, name string) {
	t.Helper()
	suite.WaitFor(t, "VM "+name+" Ready", 3*time.Minute, func() (bool, string) {
		vm, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range vm.Status.Conditions {
			if cond.Type == v1.VirtualMachineReady {
				return cond.Status == corev1.ConditionTrue, string(cond.Status) + " " + cond.Reason
			}
		}
		return false, "no Ready condition"
	})
}

// BenchmarkPVCStart starts the VMs of pvcVMs (root disk on a Filesystem
// claim, on a Block claim), examples/vm-disk.yaml (the same disk from a
// container disk) and examples/vm-efi.yaml (its UEFI disk, secure boot)
// one after another, b.N times each, and reports create →
// VM Ready and create → the guest answers HTTP, p50 and p95 in seconds
// (docs/performance.md):
//
//	go test -run '^$' -bench PVCStart -benchtime 5x ./test/e2e/
func BenchmarkPVCStart(b *testing.B) {
	c := suite.Need(b)
	fsVM, blockVM := pvcVMs(b, c)
	type series struct{ ready, http []time.Duration }
	kinds := []string{"filesystem", "block", "containerdisk", "efi"}
	got := map[string]*series{}
	for _, k := range kinds {
		got[k] = &series{}
	}
	for i := 0; b.Loop(); i++ {
		for _, kind := range kinds {
			var vm *v1.VirtualMachine
			switch kind {
			case "filesystem":
				vm = fsVM.DeepCopy()
			case "block":
				vm = blockVM.DeepCopy()
			case "efi":
				vm = framework.ExampleVM(b, "vm-efi.yaml", "bench-efi", v1.RunStrategyAlways)
			default:
				vm = framework.ExampleVM(b, "vm-disk.yaml", "bench-disk", v1.RunStrategyAlways)
			}
			vm.Name = fmt.Sprintf("%s-%d", vm.Name, i)
			vm.Spec.Template.ObjectMeta.Labels["kubevirt.io/vm"] = vm.Name
			began := time.Now()
			if _, err := c.Client.KubevirtV1().VirtualMachines("default").Create(b.Context(), vm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			waitVMReady(b, c, vm.Name)
			got[kind].ready = append(got[kind].ready, time.Since(began))
			bootedIP(b, c, vm)
			got[kind].http = append(got[kind].http, time.Since(began))
			deleteAndWait(b, c, vm.Name)
		}
	}
	for _, kind := range kinds {
		for _, m := range []struct {
			name string
			d    []time.Duration
		}{{kind + "-ready", got[kind].ready}, {kind + "-http", got[kind].http}} {
			reportPercentiles(b, m.name, m.d)
		}
	}
	b.ReportMetric(0, "ns/op")
}

func ptr[T any](v T) *T { return &v }
