package vmi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

func storage(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
}

// sized is a bound claim as the API server holds it: requests, capacity,
// access modes and volume mode.
func sized(requests, capacity string, mode corev1.PersistentVolumeMode) func(*corev1.PersistentVolumeClaim) {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		pvc.Spec.VolumeMode = &mode
		pvc.Spec.Resources.Requests = storage(requests)
		if capacity != "" {
			pvc.Status.Capacity = storage(capacity)
		}
	}
}

func TestVolumeStatus(t *testing.T) {
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	fsOverhead, blockOverhead := "0.055", "0"
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	data := claim("data", sized("16Mi", "20Mi", fs))
	dev := claim("dev", sized("64Mi", "64Mi", block), func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Annotations = map[string]string{"cdi.kubevirt.io/storage.preallocation": "true"}
	})
	claims := map[string]*corev1.PersistentVolumeClaim{"data": data, "dev": dev}
	volumes := []v1.Volume{
		{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
		pvcVolume("datadisk", "data"),
		dvVolume("devdisk", "dev"),
		pvcVolume("pending", "not-in-cache"),
	}
	old := []v1.VolumeStatus{
		{Name: "root", Target: "vda"},
		{Name: "pending", Target: "vdd", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "not-in-cache"}},
		{Name: "removed", Target: "vde"},
	}
	want := []v1.VolumeStatus{
		{Name: "root", Target: "vda"},
		{Name: "datadisk", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "data", AccessModes: rwo, VolumeMode: &fs,
			Capacity: storage("20Mi"), Requests: storage("16Mi"), FilesystemOverhead: &fsOverhead}},
		{Name: "devdisk", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "dev", AccessModes: rwo, VolumeMode: &block,
			Capacity: storage("64Mi"), Requests: storage("64Mi"), Preallocated: true, FilesystemOverhead: &blockOverhead}},
		{Name: "pending", Target: "vdd", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "not-in-cache"}},
	}
	got := volumeStatus(volumes, old, claims)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("volumeStatus (-want +got):\n%s", diff)
	}
	// The status does not share the cached claim's maps.
	got[1].PersistentVolumeClaimInfo.Capacity[corev1.ResourceStorage] = resource.MustParse("1Gi")
	if q := data.Status.Capacity[corev1.ResourceStorage]; q.String() != "20Mi" {
		t.Errorf("the cached claim's capacity changed to %s", q.String())
	}
	if got := volumeStatus(nil, old, claims); got != nil {
		t.Errorf("no volumes: %+v, want none", got)
	}
}

// TestHandOverReportsClaims: the write that hands a VMI over (Scheduled)
// carries status.volumeStatus with the claims' info, so the node's launcher
// sees the sizes before it prepares the disks; nothing is written before.
func TestHandOverReportsClaims(t *testing.T) {
	vmi := withVolumes(newVMI(v1.Scheduling), pvcVolume("datadisk", "data"))
	for _, tc := range []struct {
		name    string
		ready   bool
		phase   v1.VirtualMachineInstancePhase
		entries int
	}{
		{"pod not ready: no volume status yet", false, v1.Scheduling, 0},
		{"ready pod: Scheduled with the claim's info in the same write", true, v1.Scheduled, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newClaimHarness(t, fakeRenderer{}, vmi.DeepCopy(), claim("data", sized("16Mi", "16Mi", corev1.PersistentVolumeFilesystem)))
			if err := h.c.podIndexer.Add(launcherPod(vmi, corev1.PodRunning, tc.ready, "node01")); err != nil {
				t.Fatal(err)
			}
			h.client.ClearActions()
			if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"update virtualmachineinstances"}, fakewrites.List(h.kube.Actions(), h.client.Actions())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			got := h.vmi(t)
			if got.Status.Phase != tc.phase || len(got.Status.VolumeStatus) != tc.entries {
				t.Fatalf("phase %s, volumeStatus %+v; want %s with %d entries", got.Status.Phase, got.Status.VolumeStatus, tc.phase, tc.entries)
			}
			if tc.entries == 0 {
				return
			}
			info := got.Status.VolumeStatus[0].PersistentVolumeClaimInfo
			if info == nil || info.ClaimName != "data" || info.Capacity.Storage().String() != "16Mi" || info.Requests.Storage().String() != "16Mi" ||
				info.FilesystemOverhead == nil || *info.FilesystemOverhead != DefaultFilesystemOverhead {
				t.Errorf("volumeStatus[0].persistentVolumeClaimInfo %+v; want claim data, 16Mi capacity and requests, overhead %s", info, DefaultFilesystemOverhead)
			}
		})
	}
}

// TestHandOverReportsMigratable: the write that hands a VMI over carries
// its LiveMigratable condition and migration method too, as
// migration.LiveMigratable computes them from the spec and its claims, so
// the migration controller has nothing left to write;
// a second sync keeps the condition's times.
func TestHandOverReportsMigratable(t *testing.T) {
	vmi := withVolumes(newVMI(v1.Scheduling), pvcVolume("datadisk", "data"))
	h := newClaimHarness(t, fakeRenderer{}, vmi.DeepCopy(), claim("data", sized("16Mi", "16Mi", corev1.PersistentVolumeFilesystem)))
	if err := h.c.podIndexer.Add(launcherPod(vmi, corev1.PodRunning, true, "node01")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	got := h.vmi(t)
	want, method := migration.LiveMigratable(got, func(string, string) *corev1.PersistentVolumeClaim {
		return claim("data", sized("16Mi", "16Mi", corev1.PersistentVolumeFilesystem))
	})
	var cond *v1.VirtualMachineInstanceCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.VirtualMachineInstanceIsMigratable {
			cond = &got.Status.Conditions[i]
		}
	}
	if got.Status.Phase != v1.Scheduled || cond == nil || cond.Status != want.Status || cond.Reason != want.Reason ||
		cond.LastProbeTime.IsZero() || got.Status.MigrationMethod != method {
		t.Fatalf("phase %s, LiveMigratable %+v, method %q; want Scheduled with %s/%s and %q", got.Status.Phase, cond, got.Status.MigrationMethod, want.Status, want.Reason, method)
	}
	if err := h.c.vmiIndexer.Update(got); err != nil {
		t.Fatal(err)
	}
	h.client.ClearActions()
	h.c.now = func() time.Time { return now.Add(time.Minute) }
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatal(err)
	}
	if writes := fakewrites.List(h.kube.Actions(), h.client.Actions()); len(writes) != 0 {
		t.Errorf("a second sync of an unchanged VMI wrote %v", writes)
	}
}
