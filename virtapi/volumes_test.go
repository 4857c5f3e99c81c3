package virtapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const addData = `{"name":"data","disk":{"disk":{"bus":"scsi"},"serial":"D1"},"volumeSource":{"persistentVolumeClaim":{"claimName":"data-claim"}}}`

// TestAddAndRemoveVolumeOnVM: virtctl addvolume --persist puts a
// hotpluggable claim and its disk into the VM's template, removevolume
// takes them out again; KubeVirt's refusals keep their messages.
func TestAddAndRemoveVolumeOnVM(t *testing.T) {
	vm := testVM(v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}}
	vm.Spec.Template.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "root"}}
	ts := newTestServer(t, nil, vm)
	path := "/namespaces/ns/virtualmachines/vm/"
	if code, st := ts.do(t, http.MethodPut, path+"addvolume", addData); code != http.StatusAccepted {
		t.Fatalf("addvolume = %d %q", code, st.Message)
	}
	got, err := ts.kv.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Spec.Template.Spec
	if len(spec.Volumes) != 2 || spec.Volumes[1].PersistentVolumeClaim == nil || !spec.Volumes[1].PersistentVolumeClaim.Hotpluggable || spec.Volumes[1].PersistentVolumeClaim.ClaimName != "data-claim" {
		t.Errorf("volumes after addvolume: %+v", spec.Volumes)
	}
	if d := spec.Domain.Devices.Disks; len(d) != 2 || d[1].Name != "data" || d[1].Disk == nil || d[1].Disk.Bus != v1.DiskBusSCSI || d[1].Serial != "D1" {
		t.Errorf("disks after addvolume: %+v", d)
	}
	for _, tc := range []struct {
		sub, body string
		code      int
		want      string
	}{
		{"addvolume", addData, 409, "Unable to add volume [data] because volume with that name already exists"},
		{"addvolume", strings.Replace(addData, `"name":"data"`, `"name":"other"`, 1), 409, "Unable to add volume source [data-claim] because it already exists"},
		{"addvolume", `{"disk":{},"volumeSource":{}}`, 400, "AddVolumeOptions requires name to be set"},
		{"addvolume", `{"name":"x","volumeSource":{"persistentVolumeClaim":{"claimName":"c"}}}`, 400, "AddVolumeOptions requires disk to not be nil"},
		{"addvolume", `{"name":"x","disk":{}}`, 400, "AddVolumeOptions requires VolumeSource to not be nil"},
		{"addvolume", `{"name":"x","disk":{"disk":{"bus":"sata"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"c"}}}`, 400, `disk x is on bus "sata"`},
		{"removevolume", `{"name":"root"}`, 409, "Unable to remove volume [root] because it is not hotpluggable"},
		{"removevolume", `{"name":"nope"}`, 409, "Unable to remove volume [nope] because it does not exist"},
		{"removevolume", `{}`, 400, "RemoveVolumeOptions requires name to be set"},
	} {
		if code, st := ts.do(t, http.MethodPut, path+tc.sub, tc.body); code != tc.code || !strings.Contains(st.Message, tc.want) {
			t.Errorf("%s %s = %d %q, want %d %q", tc.sub, tc.body, code, st.Message, tc.code, tc.want)
		}
	}
	// Removed by its claim's name, as virtctl allows.
	if code, st := ts.do(t, http.MethodPut, path+"removevolume", `{"name":"data-claim"}`); code != http.StatusAccepted {
		t.Fatalf("removevolume = %d %q", code, st.Message)
	}
	got, _ = ts.kv.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if spec := got.Spec.Template.Spec; len(spec.Volumes) != 1 || len(spec.Domain.Devices.Disks) != 1 || spec.Volumes[0].Name != "root" {
		t.Errorf("after removevolume: volumes %+v, disks %+v", spec.Volumes, spec.Domain.Devices.Disks)
	}
}

// TestAddVolumeOnVMI: a running VMI of its own takes the volume into its
// spec; one a VM owns, or one not running, refuses as KubeVirt does.
func TestAddVolumeOnVMI(t *testing.T) {
	vmi := testVMI(v1.Running)
	ts := newTestServer(t, nil, vmi)
	path := "/namespaces/ns/virtualmachineinstances/vm/"
	if code, st := ts.do(t, http.MethodPut, path+"addvolume", addData); code != http.StatusAccepted {
		t.Fatalf("addvolume = %d %q", code, st.Message)
	}
	got, err := ts.kv.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Volumes) != 1 || !v1.IsHotpluggable(&got.Spec.Volumes[0]) || len(got.Spec.Domain.Devices.Disks) != 1 {
		t.Errorf("VMI spec after addvolume: volumes %+v, disks %+v", got.Spec.Volumes, got.Spec.Domain.Devices.Disks)
	}
	if code, st := ts.do(t, http.MethodPut, path+"removevolume", `{"name":"data"}`); code != http.StatusAccepted {
		t.Fatalf("removevolume = %d %q", code, st.Message)
	}
	got, _ = ts.kv.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if len(got.Spec.Volumes) != 0 || len(got.Spec.Domain.Devices.Disks) != 0 {
		t.Errorf("VMI spec after removevolume: volumes %+v, disks %+v", got.Spec.Volumes, got.Spec.Domain.Devices.Disks)
	}

	owned := testVMI(v1.Running)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: "vm", UID: "vm-uid", Controller: ptr(true)}}
	ts = newTestServer(t, nil, owned)
	if code, st := ts.do(t, http.MethodPut, path+"addvolume", addData); code != 400 || st.Message != "VMI ns/vm is owned by a VM" {
		t.Errorf("addvolume on a VM's VMI = %d %q", code, st.Message)
	}
	ts = newTestServer(t, nil, testVMI(v1.Scheduled))
	if code, st := ts.do(t, http.MethodPut, path+"addvolume", addData); code != 409 || !strings.Contains(st.Message, msgVMINotRunning) {
		t.Errorf("addvolume on a VMI not running = %d %q", code, st.Message)
	}
}
