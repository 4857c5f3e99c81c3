package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	exportv1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestVMExport (#37 item 2): a VM's claim, written by its guest, is exported
// with KubeVirt's virtctl:
//   - while the VM runs, the export waits (Pending, Ready False InUse);
//   - once it is stopped, the export is Ready with KubeVirt's internal links
//     (raw and gzip URLs on the Service, the manifests, the CA);
//   - `virtctl vmexport download --port-forward` (which creates the
//     export, waits, port-forwards to the server pod through the API
//     server and deletes the export after) fetches the disk, decompressed
//     (--format=raw) and gzip-compressed, byte-identical to the claim's
//     disk.img, which begins with what the guest wrote;
//   - `--manifest` prints the VM's manifest;
//   - an export whose TTL ends is deleted.
func TestVMExport(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm, claim, _, marker := claimVM(t, c, "vm-export", "export-data")

	virtctl := virtctlFor(t, c)
	exports := c.Client.ExportV1beta1().VirtualMachineExports("default")
	t.Cleanup(func() {
		for _, name := range []string{"export-running", "export-dl", "export-gz", "export-manifest", "export-ttl"} {
			_ = exports.Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	virtctl.run(t, "", "vmexport", "create", "export-running", "--vm="+vm.Name)
	waitExport(t, c, "export-running", "Pending, Ready False InUse", func(e *exportv1.VirtualMachineExport) bool {
		r := exportCondition(e, exportv1.ConditionReady)
		return e.Status.Phase == exportv1.Pending && r != nil && r.Reason == "InUse"
	})

	setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, vm.Name)
	began := time.Now()
	e := waitExport(t, c, "export-running", "Ready", func(e *exportv1.VirtualMachineExport) bool { return e.Status.Phase == exportv1.Ready })
	t.Logf("export of the stopped VM Ready %v after its VMI was gone", time.Since(began).Round(time.Millisecond))
	host := "https://virt-export-export-running.default.svc"
	links := e.Status.Links
	switch {
	case links == nil || links.Internal == nil || links.External != nil:
		t.Fatalf("links: %+v", links)
	case !strings.Contains(links.Internal.Cert, "BEGIN CERTIFICATE"):
		t.Errorf("internal cert: %q", links.Internal.Cert)
	case len(links.Internal.Volumes) != 1 || links.Internal.Volumes[0].Name != claim.Name || len(links.Internal.Volumes[0].Formats) != 2 ||
		links.Internal.Volumes[0].Formats[0] != (exportv1.VirtualMachineExportVolumeFormat{Format: exportv1.KubeVirtRaw, Url: host + "/volumes/" + claim.Name + "/disk.img"}) ||
		links.Internal.Volumes[0].Formats[1] != (exportv1.VirtualMachineExportVolumeFormat{Format: exportv1.KubeVirtGz, Url: host + "/volumes/" + claim.Name + "/disk.img.gz"}):
		t.Errorf("volumes: %+v", links.Internal.Volumes)
	case len(links.Internal.Manifests) != 2 || links.Internal.Manifests[0].Url != host+"/internal/manifests/all":
		t.Errorf("manifests: %+v", links.Internal.Manifests)
	}
	// virtctl names its own token Secret (secret-<name>) in the spec.
	if e.Status.ServiceName != "virt-export-export-running" || e.Status.TokenSecretRef == nil || *e.Status.TokenSecretRef != "secret-export-running" ||
		e.Status.VirtualMachineName == nil || *e.Status.VirtualMachineName != vm.Name || e.Status.TTLExpirationTime == nil ||
		!e.Status.TTLExpirationTime.Equal(&metav1.Time{Time: e.CreationTimestamp.Add(exportv1.DefaultDurationTTL)}) {
		t.Errorf("status: service %q, token %v, VM %v, expiry %v (created %v)", e.Status.ServiceName, ptrString(e.Status.TokenSecretRef),
			ptrString(e.Status.VirtualMachineName), e.Status.TTLExpirationTime, e.CreationTimestamp)
	}
	virtctl.run(t, "", "vmexport", "delete", "export-running")

	// KubeVirt's virtctl downloads the disk through a port-forward.
	img, err := os.ReadFile(claimImage(t, c, claim.Name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(img, []byte(marker+"\n")) {
		t.Fatalf("the claim's disk.img does not begin with what the guest wrote (%q)", marker)
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.img")
	began = time.Now()
	virtctl.run(t, "Download finished succesfully", "vmexport", "download", "export-dl", "--vm="+vm.Name, "--volume="+claim.Name,
		"--output="+raw, "--port-forward", "--format=raw")
	t.Logf("virtctl vmexport download --format=raw of a %d MiB disk: %v (create, server Ready, port-forward, download, delete)", len(img)>>20, time.Since(began).Round(time.Millisecond))
	if got, err := os.ReadFile(raw); err != nil || !bytes.Equal(got, img) {
		t.Errorf("the raw download (%d bytes, %v) differs from the claim's disk.img (%d bytes)", len(got), err, len(img))
	}
	gz := filepath.Join(dir, "disk.img.gz")
	virtctl.run(t, "Download finished succesfully", "vmexport", "download", "export-gz", "--vm="+vm.Name, "--output="+gz, "--port-forward")
	if got, err := gunzipFile(gz); err != nil || !bytes.Equal(got, img) {
		t.Errorf("the gzip download, decompressed (%d bytes, %v), differs from the claim's disk.img (%d bytes)", len(got), err, len(img))
	}
	for _, name := range []string{"export-dl", "export-gz"} {
		waitExportGone(t, c, name) // virtctl deletes the exports it created
	}

	manifest := virtctl.run(t, "kind: VirtualMachine", "vmexport", "download", "export-manifest", "--vm="+vm.Name, "--manifest", "--port-forward")
	for _, want := range []string{"name: " + vm.Name, "claimName: " + claim.Name, "kind: ConfigMap", "name: export-ca-cm-export-manifest"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("the manifest lacks %q:\n%s", want, manifest)
		}
	}

	// The time to live: the export is deleted when it ends.
	virtctl.run(t, "", "vmexport", "create", "export-ttl", "--pvc="+claim.Name, "--ttl=5s")
	waitExportGone(t, c, "export-ttl")
	if _, err := exports.Get(ctx, "export-manifest", metav1.GetOptions{}); err != nil {
		t.Errorf("the export of --manifest is kept, as virtctl does: %v", err)
	}
}

// claimVM starts examples/vm-net.yaml as vmName with a 32Mi claim of the
// default StorageClass as its disk /dev/vda (the guest boots its kernel
// without one), and has the guest write a marker line at its start. It
// returns the VM, the claim, the guest's IP and the marker.
func claimVM(t *testing.T, c *cluster.Cluster, vmName, claimName string) (*v1.VirtualMachine, *corev1.PersistentVolumeClaim, string, string) {
	t.Helper()
	claim := rwoClaim(claimName, "32Mi")
	createClaim(t, c, claim)
	vm := framework.ExampleVM(t, "vm-net.yaml", vmName, v1.RunStrategyAlways)
	addDataDisk(vm, claim.Name)
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	ip := vmi.Status.Interfaces[0].IP
	marker := fmt.Sprintf("%s-%d", claimName, time.Now().UnixNano())
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vda="+marker), "wrote "+marker+" to /dev/vda", time.Minute)
	return vm, claim, ip, marker
}

func exportCondition(e *exportv1.VirtualMachineExport, t exportv1.ConditionType) *exportv1.Condition {
	if e.Status == nil {
		return nil
	}
	for i := range e.Status.Conditions {
		if e.Status.Conditions[i].Type == t {
			return &e.Status.Conditions[i]
		}
	}
	return nil
}

// waitExport waits until the export satisfies ok and returns it.
func waitExport(t *testing.T, c *cluster.Cluster, name, what string, ok func(*exportv1.VirtualMachineExport) bool) *exportv1.VirtualMachineExport {
	t.Helper()
	var e *exportv1.VirtualMachineExport
	suite.WaitFor(t, "VirtualMachineExport "+name+" "+what, 3*time.Minute, func() (bool, string) {
		var err error
		e, err = c.Client.ExportV1beta1().VirtualMachineExports("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if e.Status == nil {
			return false, "no status"
		}
		return ok(e), fmt.Sprintf("%s %+v", e.Status.Phase, e.Status.Conditions)
	})
	return e
}

func waitExportGone(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	suite.WaitFor(t, "VirtualMachineExport "+name+" deleted", time.Minute, func() (bool, string) {
		_, err := c.Client.ExportV1beta1().VirtualMachineExports("default").Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func gunzipFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// TestClaimResize (#37 item 4): KubeVirt's ExpandDisks (a feature gate the
// local cluster turns on). local-path-provisioner has no resizer (its
// StorageClass does not allow expansion), so the test does a resizer's
// writes itself: the PersistentVolume's capacity, then the claim's
// status.capacity. The VMI reports the new capacity and the running
// guest's disk grows to (1 - filesystem overhead) × capacity, keeping what
// the guest wrote.
func TestClaimResize(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm, claim, ip, marker := claimVM(t, c, "vm-resize", "resize-data")
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disksize?vda"), fmt.Sprintf("%d\n", 32<<20), time.Minute)

	// The resizer's writes: the volume, then the claim's status.
	pvc, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bigger := resource.MustParse("128Mi")
	pv.Spec.Capacity[corev1.ResourceStorage] = bigger
	if _, err := c.Kube.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	pvc.Status.Capacity[corev1.ResourceStorage] = bigger
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, vm.Name, "the claim's new capacity in status.volumeStatus", func(vmi *v1.VirtualMachineInstance) bool {
		for _, st := range vmi.Status.VolumeStatus {
			if st.PersistentVolumeClaimInfo != nil && st.PersistentVolumeClaimInfo.ClaimName == claim.Name {
				got := st.PersistentVolumeClaimInfo.Capacity[corev1.ResourceStorage]
				return got.Cmp(bigger) == 0
			}
		}
		return false
	})
	// 0.945 × 128 MiB = 120.96 MiB, rounded down to 1 MiB.
	want := int64(120 << 20)
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disksize?vda"), fmt.Sprintf("%d\n", want), time.Minute)
	t.Logf("claim capacity 32Mi → 128Mi: the guest sees %d bytes %v after the claim's status changed", want, time.Since(began).Round(time.Millisecond))
	suite.HTTPGetUntil(t, framework.GuestURL(ip, 80, "/cgi-bin/disk?vda"), marker+"\n", 30*time.Second)
	if fi, err := os.Stat(claimImage(t, c, claim.Name)); err != nil {
		t.Error(err)
	} else if fi.Size() != want {
		t.Errorf("the claim's disk.img after the expansion: %d bytes, want %d", fi.Size(), want)
	}
}
