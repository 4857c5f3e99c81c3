package vm

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestMemoryDumpRequestPhases walks a memory dump request through
// KubeVirt's phases as the instance's spec and volume status move on.
func TestMemoryDumpRequestPhases(t *testing.T) {
	start, end := metav1.Now(), metav1.Now()
	vmWith := func(req *v1.VirtualMachineMemoryDumpRequest) *v1.VirtualMachine {
		vm := newVM(v1.RunStrategyAlways)
		vm.Status.MemoryDumpRequest = req
		return vm
	}
	vmiWith := func(inSpec bool, st *v1.VolumeStatus) *v1.VirtualMachineInstance {
		vmi := &v1.VirtualMachineInstance{}
		if inSpec {
			vmi.Spec.Volumes = []v1.Volume{memoryDumpVolume("dump")}
		}
		if st != nil {
			vmi.Status.VolumeStatus = []v1.VolumeStatus{*st}
		}
		return vmi
	}
	info := &v1.DomainMemoryDumpInfo{StartTimestamp: &start, EndTimestamp: &end, ClaimName: "dump", TargetFileName: "vm-dump-x.memory.dump"}
	for _, tc := range []struct {
		name  string
		phase v1.MemoryDumpPhase
		rm    bool
		vmi   *v1.VirtualMachineInstance
		want  v1.MemoryDumpPhase // "" for a cleared request
		file  bool
	}{
		{"associating, volume not added yet", v1.MemoryDumpAssociating, false, vmiWith(false, nil), v1.MemoryDumpAssociating, false},
		{"associating, volume in the instance", v1.MemoryDumpAssociating, false, vmiWith(true, nil), v1.MemoryDumpInProgress, false},
		{"in progress", v1.MemoryDumpInProgress, false, vmiWith(true, &v1.VolumeStatus{Name: "dump", Phase: v1.MemoryDumpVolumeInProgress, MemoryDumpVolume: info}), v1.MemoryDumpInProgress, false},
		{"dump written", v1.MemoryDumpInProgress, false, vmiWith(true, &v1.VolumeStatus{Name: "dump", Phase: v1.MemoryDumpVolumeCompleted, MemoryDumpVolume: info}), v1.MemoryDumpUnmounting, true},
		{"dump failed", v1.MemoryDumpInProgress, false, vmiWith(true, &v1.VolumeStatus{Name: "dump", Phase: v1.MemoryDumpVolumeFailed, Message: "no space", MemoryDumpVolume: info}), v1.MemoryDumpFailed, false},
		{"unmounting, volume still listed", v1.MemoryDumpUnmounting, false, vmiWith(false, &v1.VolumeStatus{Name: "dump"}), v1.MemoryDumpUnmounting, false},
		{"unmounted", v1.MemoryDumpUnmounting, false, vmiWith(false, nil), v1.MemoryDumpCompleted, false},
		{"remove asked, volume still there", v1.MemoryDumpCompleted, true, vmiWith(true, nil), v1.MemoryDumpDissociating, false},
		{"removed", v1.MemoryDumpDissociating, true, vmiWith(false, nil), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := memoryDumpRequest(vmWith(&v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: tc.phase, Remove: tc.rm}), tc.vmi)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("request %+v, want it cleared", got)
			case tc.want == "":
				return
			case got == nil:
				t.Fatalf("request cleared, want phase %s", tc.want)
			case got.Phase != tc.want:
				t.Errorf("phase %s, want %s", got.Phase, tc.want)
			}
			if tc.file && (got.FileName == nil || *got.FileName != info.TargetFileName || got.EndTimestamp == nil) {
				t.Errorf("completed request %+v: want the file and the end", got)
			}
			if tc.want == v1.MemoryDumpFailed && got.Message != "no space" {
				t.Errorf("failed request's message %q", got.Message)
			}
		})
	}
}
