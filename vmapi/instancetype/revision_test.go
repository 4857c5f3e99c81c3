package instancetype_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestControllerRevision(t *testing.T) {
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "vm-uid"}}
	it := &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "ns", UID: "it-uid", Generation: 3,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}, Finalizers: []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: *small(),
	}
	rev, err := instancetype.NewControllerRevision(vm, it)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Name != "web-small-v1beta1-it-uid-3" || rev.Namespace != "ns" {
		t.Errorf("revision %s/%s, want ns/web-small-v1beta1-it-uid-3", rev.Namespace, rev.Name)
	}
	if ref := metav1.GetControllerOf(rev); ref == nil || ref.UID != "vm-uid" || ref.Kind != "VirtualMachine" {
		t.Errorf("controller = %+v, want the VM", ref)
	}
	wantLabels := map[string]string{
		instancetype.ControllerRevisionObjectGenerationLabel: "3",
		instancetype.ControllerRevisionObjectKindLabel:       "VirtualMachineInstancetype",
		instancetype.ControllerRevisionObjectNameLabel:       "small",
		instancetype.ControllerRevisionObjectUIDLabel:        "it-uid",
		instancetype.ControllerRevisionObjectVersionLabel:    "v1beta1",
	}
	if diff := cmp.Diff(wantLabels, rev.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	var stored map[string]any
	if err := json.Unmarshal(rev.Data.Raw, &stored); err != nil {
		t.Fatal(err)
	}
	md := stored["metadata"].(map[string]any)
	if stored["apiVersion"] != "instancetype.kubevirt.io/v1beta1" || stored["kind"] != "VirtualMachineInstancetype" ||
		md["labels"] != nil || md["annotations"] != nil || md["finalizers"] != nil || md["managedFields"] != nil || md["name"] != "small" {
		t.Errorf("stored object = %v; want its kind and name, without labels, annotations, finalizers and managed fields", stored)
	}
	if it.Labels == nil || it.GetObjectKind().GroupVersionKind().Kind != "" {
		t.Error("NewControllerRevision changed the object it was given")
	}

	obj, err := instancetype.FromRevision(rev)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := instancetype.InstancetypeSpec(obj)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(small(), spec); diff != "" {
		t.Errorf("spec read back (-want +got):\n%s", diff)
	}
	if _, err := instancetype.PreferenceSpec(obj); err == nil {
		t.Error("an instance type's revision gave a preference spec")
	}

	// The same spec in a revision decoded by a client (Data.Object) is the same object.
	decoded := rev.DeepCopy()
	decoded.Data = runtime.RawExtension{Object: obj}
	if same, err := instancetype.SameObject(rev, decoded); err != nil || !same {
		t.Errorf("SameObject = %v, %v; want true", same, err)
	}
	it.Spec.CPU.Guest = 8
	edited, _ := instancetype.NewControllerRevision(vm, it)
	if same, err := instancetype.SameObject(rev, edited); err != nil || same {
		t.Errorf("SameObject of another spec = %v, %v; want false", same, err)
	}
}

func TestFromRevisionRejectsOtherObjects(t *testing.T) {
	for _, data := range []string{`{"apiVersion":"apps/v1","kind":"Deployment"}`, `not json`, `{"apiVersion":"instancetype.kubevirt.io/v1alpha2","kind":"VirtualMachineInstancetype"}`} {
		rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Data: runtime.RawExtension{Raw: []byte(data)}}
		if obj, err := instancetype.FromRevision(rev); err == nil {
			t.Errorf("FromRevision(%s) = %v; want an error", data, obj)
		}
	}
}

// FuzzFromRevision feeds arbitrary revision data: FromRevision must return
// an object or an error, never panic.
func FuzzFromRevision(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"instancetype.kubevirt.io/v1beta1","kind":"VirtualMachineClusterPreference","spec":{"cpu":{"preferredCPUTopology":"spread"}}}`))
	f.Add([]byte(`{"apiVersion":"instancetype.kubevirt.io/v1beta1","kind":"VirtualMachineInstancetype","spec":{"cpu":{"guest":2},"memory":{"guest":"1Gi"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := instancetype.FromRevision(&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: data}})
		if err == nil && obj == nil {
			t.Fatal("no object and no error")
		}
	})
}
