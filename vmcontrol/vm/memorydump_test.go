package vm

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
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

// claimsOf adapts a fake clientset's claims to kubeclient.PersistentVolumeClaimsGetter.
type claimsOf struct{ kube *kubefake.Clientset }

func (c claimsOf) PersistentVolumeClaims(ns string) kubeclient.PersistentVolumeClaimInterface {
	return c.kube.CoreV1().PersistentVolumeClaims(ns)
}

// TestMemoryDumpClaimAnnotation: the claim of a written dump is annotated
// with the file, that of a failed one with KubeVirt's "Memory dump failed",
// once: a claim the cache shows annotated so is not written again, and
// nothing is written before the dump ends.
func TestMemoryDumpClaimAnnotation(t *testing.T) {
	file := "vm-dump-20261129-161500.memory.dump"
	for _, tc := range []struct {
		name   string
		req    v1.VirtualMachineMemoryDumpRequest
		cached string // the annotation the cache shows
		want   string // "" for no write
	}{
		{"written", v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: v1.MemoryDumpUnmounting, FileName: &file}, "", file},
		{"written, already annotated", v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: v1.MemoryDumpUnmounting, FileName: &file}, file, ""},
		{"a second dump onto the claim", v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: v1.MemoryDumpUnmounting, FileName: &file}, "vm-dump-20261128-090000.memory.dump", file},
		{"failed", v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: v1.MemoryDumpFailed}, "", "Memory dump failed"},
		{"in progress", v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: v1.MemoryDumpInProgress}, "", ""},
		{"completed", v1.VirtualMachineMemoryDumpRequest{ClaimName: "dump", Phase: v1.MemoryDumpCompleted, FileName: &file}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "dump", Namespace: "default"}}
			if tc.cached != "" {
				claim.Annotations = map[string]string{v1.PVCMemoryDumpAnnotation: tc.cached}
			}
			kube := kubefake.NewClientset(claim)
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			if err := idx.Add(claim); err != nil {
				t.Fatal(err)
			}
			c := &Controller{claims: corelisters.NewPersistentVolumeClaimLister(idx), claimClient: claimsOf{kube}}
			vm := newVM(v1.RunStrategyAlways)
			vm.Namespace = "default"
			vm.Status.MemoryDumpRequest = &tc.req
			if err := c.annotateDumpClaim(t.Context(), vm); err != nil {
				t.Fatal(err)
			}
			var writes int
			for _, a := range kube.Actions() {
				if a.GetVerb() == "patch" {
					writes++
				}
			}
			got, err := kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "dump", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && writes != 0:
				t.Errorf("%d writes, want none", writes)
			case tc.want != "" && (writes != 1 || got.Annotations[v1.PVCMemoryDumpAnnotation] != tc.want):
				t.Errorf("%d writes, annotation %q; want one write of %q", writes, got.Annotations[v1.PVCMemoryDumpAnnotation], tc.want)
			}
		})
	}
	// A claim that is gone is an error naming it.
	c := &Controller{claims: corelisters.NewPersistentVolumeClaimLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), claimClient: claimsOf{kubefake.NewClientset()}}
	vm := newVM(v1.RunStrategyAlways)
	vm.Status.MemoryDumpRequest = &v1.VirtualMachineMemoryDumpRequest{ClaimName: "gone", Phase: v1.MemoryDumpFailed}
	if err := c.annotateDumpClaim(t.Context(), vm); err == nil || !strings.Contains(err.Error(), "claim gone") {
		t.Errorf("a missing claim: %v", err)
	}
}
