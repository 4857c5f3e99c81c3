package vm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
)

func vmWithDataVolume(strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	vm := newVM(strategy)
	vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-disk", Labels: map[string]string{"tier": "gold"}, Annotations: map[string]string{"note": "n"}},
		Spec:       runtime.RawExtension{Raw: []byte(`{"source":{"blank":{}},"storage":{"resources":{"requests":{"storage":"1Gi"}}}}`)},
	}}
	return vm
}

func dataVolume(vm *v1.VirtualMachine, phase string, owner *metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"phase": phase}}}
	u.SetAPIVersion("cdi.kubevirt.io/v1beta1")
	u.SetKind("DataVolume")
	u.SetName("vm-disk")
	u.SetNamespace(vm.Namespace)
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	return u
}

type dvHarness struct {
	*harness
	dyn *dynamicfake.FakeDynamicClient
}

// newDVHarness is newHarness with CDI installed (cdi false: not installed)
// and the given DataVolumes in the cache.
func newDVHarness(t *testing.T, cdi bool, vm *v1.VirtualMachine, dvs ...*unstructured.Unstructured) *dvHarness {
	t.Helper()
	client := fake.NewSimpleClientset(vm)
	f := externalversions.NewSharedInformerFactory(client, 0)
	cfg := Config{Client: client.KubevirtV1(), VMs: f.Kubevirt().V1().VirtualMachines().Informer(), VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer()}
	var dyn *dynamicfake.FakeDynamicClient
	if cdi {
		var objs []runtime.Object
		for _, dv := range dvs {
			objs = append(objs, dv)
		}
		dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{DataVolumeResource: "DataVolumeList"}, objs...)
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
		for _, dv := range dvs {
			_ = inf.GetIndexer().Add(dv)
		}
		cfg.DataVolumes, cfg.Dynamic = inf, dyn
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Kubevirt().V1().VirtualMachines().Informer().GetIndexer().Add(vm)
	c.now = func() time.Time { return now }
	c.jitter = func() float64 { return 0 }
	client.ClearActions()
	if dyn != nil {
		dyn.ClearActions()
	}
	return &dvHarness{harness: &harness{c: c, client: client}, dyn: dyn}
}

func (h *dvHarness) dvWrites() []string {
	if h.dyn == nil {
		return nil
	}
	return fakewrites.List(h.dyn.Actions())
}

func TestSyncDataVolumes(t *testing.T) {
	owner := func(vm *v1.VirtualMachine) *metav1.OwnerReference {
		ref := controllerref.Ref(vm, v1.VirtualMachineGroupVersionKind)
		return &ref
	}
	foreign := &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Importer", Name: "other", UID: "other-uid", Controller: new(bool)}
	*foreign.Controller = true
	delayed := vmWithDataVolume(v1.RunStrategyHalted)
	delayed.Annotations = map[string]string{ImmediateDataVolumeCreationAnnotation: "false"}
	unnamed := vmWithDataVolume(v1.RunStrategyAlways)
	unnamed.Spec.DataVolumeTemplates[0].ObjectMeta.Name = ""

	cases := []struct {
		name          string
		cdi           bool
		vm            *v1.VirtualMachine
		dvPhase       string // "" for no DataVolume
		dvOwner       *metav1.OwnerReference
		wantDVWrites  []string
		wantVMIWrites []string
		wantStatus    v1.VirtualMachinePrintableStatus
		wantFailure   string // reason of the Failure condition, "" for none
	}{
		{"without CDI the VM waits and says why", false, vmWithDataVolume(v1.RunStrategyAlways), "", nil,
			nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusProvisioning, ReasonDataVolumesUnavailable},
		{"missing DataVolume is created, the VM waits", true, vmWithDataVolume(v1.RunStrategyAlways), "", nil,
			[]string{"create datavolumes"}, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusProvisioning, ""},
		{"importing DataVolume: the VM waits", true, vmWithDataVolume(v1.RunStrategyAlways), "ImportInProgress", owner(vmWithDataVolume("")),
			nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusProvisioning, ""},
		{"succeeded DataVolume: the VM starts", true, vmWithDataVolume(v1.RunStrategyAlways), "Succeeded", owner(vmWithDataVolume("")),
			nil, []string{"create virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStarting, ""},
		{"WaitForFirstConsumer: the VM starts (its pod is the consumer)", true, vmWithDataVolume(v1.RunStrategyAlways), "WaitForFirstConsumer", owner(vmWithDataVolume("")),
			nil, []string{"create virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStarting, ""},
		{"unowned populated DataVolume is used as it is", true, vmWithDataVolume(v1.RunStrategyAlways), "Succeeded", nil,
			nil, []string{"create virtualmachineinstances", "update virtualmachines/status"}, v1.VirtualMachineStatusStarting, ""},
		{"failed DataVolume", true, vmWithDataVolume(v1.RunStrategyAlways), "Failed", owner(vmWithDataVolume("")),
			nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusDataVolumeError, ReasonDataVolumeError},
		{"DataVolume of another controller", true, vmWithDataVolume(v1.RunStrategyAlways), "Succeeded", foreign,
			nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusProvisioning, ReasonDataVolumeForeign},
		{"halted VM: created at once by default", true, vmWithDataVolume(v1.RunStrategyHalted), "", nil,
			[]string{"create datavolumes"}, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusStopped, ""},
		{"halted VM with immediate creation off: nothing created", true, delayed, "", nil,
			nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusStopped, ""},
		{"template without a name", true, unnamed, "", nil,
			nil, []string{"update virtualmachines/status"}, v1.VirtualMachineStatusProvisioning, ReasonFailedCreate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dvs []*unstructured.Unstructured
			if tc.dvPhase != "" {
				dvs = append(dvs, dataVolume(tc.vm, tc.dvPhase, tc.dvOwner))
			}
			h := newDVHarness(t, tc.cdi, tc.vm.DeepCopy(), dvs...)
			if err := h.c.sync(context.Background(), "ns/vm"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantDVWrites, h.dvWrites()); diff != "" {
				t.Errorf("DataVolume writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVMIWrites, h.writes()); diff != "" {
				t.Errorf("kubevirt writes (-want +got):\n%s", diff)
			}
			st := h.status(t)
			if st.PrintableStatus != tc.wantStatus {
				t.Errorf("printableStatus %q, want %q", st.PrintableStatus, tc.wantStatus)
			}
			var failure string
			for _, c := range st.Conditions {
				if c.Type == v1.VirtualMachineFailure {
					failure = c.Reason
					if c.Message == "" || !strings.Contains(c.Message, "ns/vm") {
						t.Errorf("Failure message %q does not name the VM", c.Message)
					}
				}
			}
			if failure != tc.wantFailure {
				t.Errorf("Failure reason %q, want %q", failure, tc.wantFailure)
			}
		})
	}
}

func TestNewDataVolume(t *testing.T) {
	vm := vmWithDataVolume(v1.RunStrategyAlways)
	u, err := NewDataVolume(vm, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1",
		"kind":       "DataVolume",
		"metadata": map[string]any{
			"name": "vm-disk", "namespace": "ns",
			"labels":      map[string]any{"tier": "gold", v1.CreatedByLabel: "vm-uid"},
			"annotations": map[string]any{"note": "n"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm", "uid": "vm-uid",
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{"source": map[string]any{"blank": map[string]any{}},
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}},
	}
	got, err := runtime.DefaultUnstructuredConverter.ToUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DataVolume (-want +got):\n%s", diff)
	}
	if _, err := NewDataVolume(vm, 1); err == nil {
		t.Error("want an error for a template that does not exist")
	}
}

// TestDataVolumeEventEnqueuesItsVM: a DataVolume's phase change brings its VM back.
func TestDataVolumeEventEnqueuesItsVM(t *testing.T) {
	vm := vmWithDataVolume(v1.RunStrategyAlways)
	h := newDVHarness(t, true, vm)
	ref := controllerref.Ref(vm, v1.VirtualMachineGroupVersionKind)
	h.c.enqueueDataVolumeOwner(dataVolume(vm, "Succeeded", &ref))
	h.c.enqueueDataVolumeOwner(dataVolume(vm, "Succeeded", nil)) // no owner: nothing
	if n := h.c.loop.Queue.Len(); n != 1 {
		t.Fatalf("queue length %d, want 1", n)
	}
	if key, _ := h.c.loop.Queue.Get(); key != "ns/vm" {
		t.Fatalf("queued %q, want ns/vm", key)
	}
}
