package virtapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func dumpClaim(name, size string, mode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: &mode, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
	}
}

// TestMemoryDumpRequests: memorydump records KubeVirt's Associating
// request on a running VM's status, refusing what KubeVirt refuses with
// its messages; removememorydump asks to dissociate.
func TestMemoryDumpRequests(t *testing.T) {
	vmi := testVMI(v1.Running)
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	ts := newTestServer(t, nil, testVM(v1.RunStrategyAlways), vmi,
		dumpClaim("dump", "300Mi", corev1.PersistentVolumeFilesystem), dumpClaim("small", "200Mi", corev1.PersistentVolumeFilesystem),
		dumpClaim("block", "1Gi", corev1.PersistentVolumeBlock))
	path := "/namespaces/ns/virtualmachines/vm/"
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{}`, 400, "Memory dump requires claim name to be set"},
		{`{"claimName":"nope"}`, 404, `persistentvolumeclaim "nope" not found`},
		{`{"claimName":"block"}`, 409, "pvc should be filesystem pvc"},
		{`{"claimName":"small"}`, 409, "pvc size [200Mi] should be bigger then ["},
	} {
		if code, st := ts.do(t, http.MethodPut, path+"memorydump", tc.body); code != tc.code || !strings.Contains(st.Message, tc.want) {
			t.Errorf("memorydump %s = %d %q, want %d %q", tc.body, code, st.Message, tc.code, tc.want)
		}
	}
	if code, st := ts.do(t, http.MethodPut, path+"removememorydump", ""); code != 409 || !strings.Contains(st.Message, "no association found") {
		t.Errorf("removememorydump without a dump = %d %q", code, st.Message)
	}
	if code, st := ts.do(t, http.MethodPut, path+"memorydump", `{"claimName":"dump"}`); code != http.StatusAccepted {
		t.Fatalf("memorydump = %d %q", code, st.Message)
	}
	vm, err := ts.kv.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := vm.Status.MemoryDumpRequest; r == nil || r.ClaimName != "dump" || r.Phase != v1.MemoryDumpAssociating {
		t.Fatalf("memoryDumpRequest %+v, want dump Associating", r)
	}
	if code, st := ts.do(t, http.MethodPut, path+"memorydump", `{"claimName":"dump"}`); code != 409 || !strings.Contains(st.Message, "memory dump request for pvc [dump] already in progress") {
		t.Errorf("a second memorydump = %d %q", code, st.Message)
	}
	if code, st := ts.do(t, http.MethodPut, path+"memorydump", `{"claimName":"other"}`); code != 409 || !strings.Contains(st.Message, "while pvc [dump] is still associated") {
		t.Errorf("memorydump onto another claim = %d %q", code, st.Message)
	}
	if code, st := ts.do(t, http.MethodPut, path+"removememorydump", ""); code != http.StatusAccepted {
		t.Fatalf("removememorydump = %d %q", code, st.Message)
	}
	vm, _ = ts.kv.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if r := vm.Status.MemoryDumpRequest; r == nil || !r.Remove || r.Phase != v1.MemoryDumpDissociating || r.ClaimName != "dump" {
		t.Errorf("memoryDumpRequest after removememorydump %+v", r)
	}
}
