package virtapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vmkit/vmkit/podtemplate"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func review(t *testing.T, path string, op admissionv1.Operation, obj any) *admissionv1.AdmissionResponse {
	t.Helper()
	return reviewWith(t, AdmissionConfig{Emulation: true}, path, op, obj)
}

// reviewWith is review with the cluster's configuration cfg.
func reviewWith(t *testing.T, cfg AdmissionConfig, path string, op admissionv1.Operation, obj any) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var kind string
	switch obj.(type) {
	case *v1.VirtualMachineInstance:
		kind = "VirtualMachineInstance"
	case *v1.VirtualMachine:
		kind = "VirtualMachine"
	case *v1.VirtualMachineInstanceReplicaSet:
		kind = "VirtualMachineInstanceReplicaSet"
	}
	in := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "req-1", Operation: op, Object: runtime.RawExtension{Raw: raw},
			Kind:      metav1.GroupVersionKind{Group: v1.GroupName, Version: "v1", Kind: kind},
			OldObject: runtime.RawExtension{Raw: []byte(`{"spec":{"old":true}}`)}, Namespace: "ns", Name: "vm"},
	}
	body, _ := json.Marshal(in)
	rec := httptest.NewRecorder()
	AdmissionHandler(cfg).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "req-1" {
		t.Fatalf("POST %s: answer %s (%v), want a response for request req-1", path, rec.Body, err)
	}
	return out.Response
}

func runnableSpec() v1.VirtualMachineInstanceSpec {
	return v1.VirtualMachineInstanceSpec{
		Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Devices:   v1.Devices{Disks: []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}},
		},
		Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "vmkit/tiny-guest:latest"}}}},
	}
}

func TestAdmission(t *testing.T) {
	good := runnableSpec()
	bad := runnableSpec()
	bad.Domain.Devices.Disks[0].Disk.Bus = "floppy"
	limitOnly := runnableSpec()
	limitOnly.Domain.Resources = v1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	probeless := runnableSpec()
	two := int32(2)
	probeless.ReadinessProbe = &v1.Probe{PeriodSeconds: &two}
	probed := runnableSpec()
	probed.ReadinessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}}
	badPort := runnableSpec()
	badPort.LivenessProbe = &v1.Probe{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(70000)}}
	vmi := func(spec v1.VirtualMachineInstanceSpec) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: spec}
	}
	vm := func(spec v1.VirtualMachineInstanceSpec) *v1.VirtualMachine {
		return &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways), Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: spec}}}
	}
	for _, tc := range []struct {
		name      string
		path      string
		op        admissionv1.Operation
		obj       any
		wantField string // "" means allowed
	}{
		{"runnable VMI", ValidateVMIPath, admissionv1.Create, vmi(good), ""},
		{"VMI with a memory limit only, the request by default", ValidateVMIPath, admissionv1.Create, vmi(limitOnly), ""},
		{"VMI with an unknown bus", ValidateVMIPath, admissionv1.Create, vmi(bad), "spec.domain.devices.disks[0].disk.bus"},
		{"runnable VM", ValidateVMPath, admissionv1.Create, vm(good), ""},
		{"VM template with an unknown bus, on update", ValidateVMPath, admissionv1.Update, vm(bad), "spec.template.spec.domain.devices.disks[0].disk.bus"},
		{"VM without memory", ValidateVMPath, admissionv1.Create, vm(v1.VirtualMachineInstanceSpec{}), "spec.template.spec.domain.resources.requests.memory"},
		{"replica set template with an unknown bus", ValidateReplicaSetPath, admissionv1.Create, &v1.VirtualMachineInstanceReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns"},
			Spec: v1.VirtualMachineInstanceReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: &v1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: bad},
			}}, "spec.template.spec.domain.devices.disks[0].disk.bus"},
		{"delete is not validated", ValidateVMIPath, admissionv1.Delete, vmi(bad), ""},
		{"hostDisk without the HostDisk gate", ValidateVMIPath, admissionv1.Create, vmi(withHostDisk()), "spec.volumes[0].hostDisk"},
		{"persistent TPM without the VMPersistentState gate", ValidateVMIPath, admissionv1.Create, vmi(withPersistentTPM()), "spec.domain.devices.tpm.persistent"},
		{"VM with a persistent TPM without the VMPersistentState gate", ValidateVMPath, admissionv1.Create, vm(withPersistentTPM()), "spec.template.spec.domain.devices.tpm.persistent"},
		{"VMI with a guest-agent readiness probe", ValidateVMIPath, admissionv1.Create, vmi(probed), ""},
		{"VMI with a probe that checks nothing", ValidateVMIPath, admissionv1.Create, vmi(probeless), "spec.readinessProbe"},
		{"VM template with a liveness probe port out of range", ValidateVMPath, admissionv1.Create, vm(badPort), "spec.template.spec.livenessProbe.tcpSocket.port"},
		{"VM template with a label reserved to the components", ValidateVMPath, admissionv1.Create, func() *v1.VirtualMachine {
			v := vm(good)
			v.Spec.Template.ObjectMeta.Labels = map[string]string{"kubevirt.io/vm": "vm", v1.NodeNameLabel: "node01"}
			return v
		}(), "spec.template.metadata.labels[kubevirt.io/nodeName]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(t, tc.path, tc.op, tc.obj)
			if tc.wantField == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusUnprocessableEntity || !strings.Contains(resp.Result.Message, tc.wantField) {
				t.Fatalf("response %+v, want a 422 naming %s", resp.Result, tc.wantField)
			}
			if object := reflect.TypeOf(tc.obj).Elem().Name() + " ns/"; !strings.HasPrefix(resp.Result.Message, object) {
				t.Fatalf("message %q does not start with the object, %s...", resp.Result.Message, object)
			}
		})
	}
}

// With the HostDisk gate on, a hostDisk in the node's system directories is
// still refused at creation, naming the field and the directory; one in a
// directory of its own is admitted.
func TestAdmissionRefusesSystemHostDisks(t *testing.T) {
	cfg := AdmissionConfig{Emulation: true, FeatureGates: []string{podtemplate.HostDiskGate}}
	for p, want := range map[string]string{
		"/etc/ld.so.preload":         "the node's /etc",
		"/var/lib/kubelet/pki/x.img": "the node's /var/lib/kubelet",
		"/x.img":                     "the node's /",
		"/var/lib/vm-disks/x.img":    "",
	} {
		spec := withHostDisk()
		spec.Volumes[0].HostDisk.Path = p
		resp := reviewWith(t, cfg, ValidateVMIPath, admissionv1.Create, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: spec})
		switch {
		case want == "" && !resp.Allowed:
			t.Errorf("%s: refused: %+v", p, resp.Result)
		case want != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, "spec.volumes[0].hostDisk.path") || !strings.Contains(resp.Result.Message, want)):
			t.Errorf("%s: %+v, want refused naming spec.volumes[0].hostDisk.path and %q", p, resp.Result, want)
		}
	}
}

// A VMI asking for what vmkit cannot do yet (a GPU, SR-IOV on a Multus
// network) is admitted, as KubeVirt admits it, with a warning naming each
// field; the same spec with a mistake besides is refused, naming both.
func TestAdmissionWarnsOfUnsupported(t *testing.T) {
	spec := runnableSpec()
	spec.Domain.Devices.GPUs = []v1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/TU104GL_Tesla_T4"}}
	spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "sriov", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}}
	spec.Networks = []v1.Network{{Name: "sriov", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "sriov-net"}}}}
	resp := review(t, ValidateVMIPath, admissionv1.Create, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: spec})
	if !resp.Allowed {
		t.Fatalf("refused: %+v", resp.Result)
	}
	if len(resp.Warnings) != 2 || !strings.Contains(resp.Warnings[0], "spec.domain.devices.gpus") || !strings.Contains(resp.Warnings[1], "spec.domain.devices.interfaces[0].sriov") {
		t.Fatalf("warnings %q, want one naming spec.domain.devices.gpus and one spec.domain.devices.interfaces[0].sriov (the Multus network itself is supported)", resp.Warnings)
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineSpec{
		RunStrategy: v1.RunStrategyPtr(v1.RunStrategyHalted), Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: spec}}}
	if resp := review(t, ValidateVMPath, admissionv1.Create, vm); !resp.Allowed || len(resp.Warnings) != 2 || !strings.Contains(resp.Warnings[0], "spec.template.spec.domain.devices.gpus") {
		t.Fatalf("VM: allowed %v warnings %q, want admitted with warnings naming spec.template.spec.domain.devices.gpus", resp.Allowed, resp.Warnings)
	}
	spec.Domain.Resources.Requests = nil
	resp = review(t, ValidateVMIPath, admissionv1.Create, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: spec})
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "spec.domain.resources.requests.memory") {
		t.Fatalf("a spec without memory was admitted or not named: %+v", resp.Result)
	}
}

// A VMI or VM asking for more vCPUs than a node runs (513 sockets, a
// maxSockets to grow beyond 512, 600 CPUs without a topology) is admitted,
// as KubeVirt's webhook admits it (its launcher pod then stays
// unscheduled), with a warning naming the object and the field; the same
// spec with a mistake besides is refused for that mistake, and sockets
// above maxSockets are refused, as by KubeVirt.
func TestAdmissionAdmitsMoreVCPUsThanANode(t *testing.T) {
	vmi := func(mutate func(*v1.VirtualMachineInstanceSpec)) *v1.VirtualMachineInstance {
		spec := runnableSpec()
		mutate(&spec)
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: spec}
	}
	for _, tc := range []struct {
		name        string
		vmi         *v1.VirtualMachineInstance
		wantWarning string // the field a warning names; "" when refused
		wantRefused string // the field the refusal names
	}{
		{"513 sockets", vmi(func(s *v1.VirtualMachineInstanceSpec) { s.Domain.CPU = &v1.CPU{Sockets: 513} }), "spec.domain.cpu", ""},
		{"2 sockets that may grow to 1024", vmi(func(s *v1.VirtualMachineInstanceSpec) { s.Domain.CPU = &v1.CPU{Sockets: 2, MaxSockets: 1024} }), "spec.domain.cpu.maxSockets", ""},
		{"600 CPUs requested without a topology", vmi(func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("600")
		}), "spec.domain.cpu", ""},
		{"513 sockets and an unknown bus", vmi(func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.CPU = &v1.CPU{Sockets: 513}
			s.Domain.Devices.Disks[0].Disk.Bus = "floppy"
		}), "", "spec.domain.devices.disks[0].disk.bus"},
		{"4 sockets with maxSockets 2", vmi(func(s *v1.VirtualMachineInstanceSpec) { s.Domain.CPU = &v1.CPU{Sockets: 4, MaxSockets: 2} }), "", "spec.domain.cpu.sockets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(t, ValidateVMIPath, admissionv1.Create, tc.vmi)
			if tc.wantRefused != "" {
				if resp.Allowed || !strings.Contains(resp.Result.Message, tc.wantRefused) || strings.Contains(resp.Result.Message, "512") {
					t.Fatalf("allowed %v, %+v: want refused naming %s and not the vCPU count", resp.Allowed, resp.Result, tc.wantRefused)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			// What the VMI will show: ErrorUnschedulable for a count
			// (its pod asks for that many CPUs), InvalidSpec for a
			// maxSockets only (its pod would schedule).
			shows := "ErrorUnschedulable"
			if tc.wantWarning == "spec.domain.cpu.maxSockets" {
				shows = "InvalidSpec"
			}
			if len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], "VirtualMachineInstance ns/vm: "+tc.wantWarning+": ") ||
				!strings.Contains(resp.Warnings[0], "more than the supported 512") || !strings.Contains(resp.Warnings[0], shows) {
				t.Fatalf("warnings %q, want one naming VirtualMachineInstance ns/vm, %s, the 512 vCPUs a node runs and the %s the VMI will show", resp.Warnings, tc.wantWarning, shows)
			}
		})
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineSpec{
		RunStrategy: v1.RunStrategyPtr(v1.RunStrategyHalted),
		Template:    &v1.VirtualMachineInstanceTemplateSpec{Spec: vmi(func(s *v1.VirtualMachineInstanceSpec) { s.Domain.CPU = &v1.CPU{Sockets: 513} }).Spec}}}
	resp := review(t, ValidateVMPath, admissionv1.Create, vm)
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], "VirtualMachine ns/vm: spec.template.spec.domain.cpu: ") {
		t.Fatalf("VM with 513 sockets: allowed %v %+v, warnings %q; want admitted with a warning naming VirtualMachine ns/vm and spec.template.spec.domain.cpu", resp.Allowed, resp.Result, resp.Warnings)
	}
}

func withHostDisk() v1.VirtualMachineInstanceSpec {
	s := runnableSpec()
	s.Volumes[0].VolumeSource = v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/var/lib/kubelet/pki/x.img", Type: v1.HostDiskExists}}
	return s
}

func withPersistentTPM() v1.VirtualMachineInstanceSpec {
	s := runnableSpec()
	s.Domain.Devices.TPM = &v1.TPMDevice{Persistent: v1.BoolPtr(true)}
	return s
}

// An update that leaves the spec alone (a finalizer removed from a VM
// stored before the webhook existed) is admitted even if the spec is bad.
func TestAdmissionIgnoresMetadataUpdates(t *testing.T) {
	bad := runnableSpec()
	bad.Domain.Devices.Disks[0].Disk.Bus = "floppy"
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineSpec{
		RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways), Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: bad}}}
	raw, _ := json.Marshal(vm)
	vm.Finalizers = []string{"x"}
	newRaw, _ := json.Marshal(vm)
	in := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update,
		Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: raw}}}
	body, _ := json.Marshal(in)
	rec := httptest.NewRecorder()
	AdmissionHandler(AdmissionConfig{}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ValidateVMPath, bytes.NewReader(body)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed {
		t.Fatalf("metadata-only update of a VM with a bad template: %s", rec.Body)
	}
}

// A VM sized by an instance type is validated as its instances will be:
// its template needs no memory of its own; a missing instance type is left
// to the VM controller; a template that conflicts with the instance type is
// refused naming both fields, as KubeVirt's webhook refuses it.
func TestAdmissionExpandsInstancetypes(t *testing.T) {
	small := &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "ns"},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: 1},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("128Mi")},
		},
	}
	ts := newTestServer(t, nil, small)
	handler := AdmissionHandler(AdmissionConfig{Expand: ts.srv.expand})
	send := func(vm *v1.VirtualMachine) *admissionv1.AdmissionResponse {
		raw, _ := json.Marshal(vm)
		in := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
		body, _ := json.Marshal(in)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ValidateVMPath, bytes.NewReader(body)))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer %s: %v", rec.Body, err)
		}
		return out.Response
	}
	spec := runnableSpec()
	spec.Domain.Resources.Requests = nil // the instance type sizes it
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineSpec{
		RunStrategy:  v1.RunStrategyPtr(v1.RunStrategyAlways),
		Instancetype: &v1.InstancetypeMatcher{Name: "small", Kind: "VirtualMachineInstancetype"},
		Template:     &v1.VirtualMachineInstanceTemplateSpec{Spec: spec}}}
	if resp := send(vm); !resp.Allowed {
		t.Fatalf("a VM sized by its instance type: refused %+v", resp.Result)
	}
	missing := vm.DeepCopy()
	missing.Spec.Instancetype.Name = "absent"
	if resp := send(missing); !resp.Allowed {
		t.Fatalf("a VM naming a missing instance type: refused %+v", resp.Result)
	}
	conflict := vm.DeepCopy()
	conflict.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 2}
	if resp := send(conflict); resp.Allowed || !strings.Contains(resp.Result.Message, "spec.template.spec.domain.cpu.sockets") {
		t.Fatalf("a VM conflicting with its instance type: %+v, want a refusal naming the field", resp.Result)
	}
}

// While a snapshot of the VM runs, its volumes and run state cannot change;
// while a restore runs, its run state cannot: KubeVirt's refusals.
func TestAdmissionRefusesChangesDuringSnapshotOrRestore(t *testing.T) {
	base := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineSpec{
		RunStrategy: v1.RunStrategyPtr(v1.RunStrategyHalted), Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: runnableSpec()}}}
	update := func(edit func(old, vm *v1.VirtualMachine)) *admissionv1.AdmissionResponse {
		old, vm := base.DeepCopy(), base.DeepCopy()
		edit(old, vm)
		oldRaw, _ := json.Marshal(old)
		newRaw, _ := json.Marshal(vm)
		in := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update, Name: "vm", Namespace: "ns",
			Kind: metav1.GroupVersionKind{Group: v1.GroupName, Version: "v1", Kind: "VirtualMachine"}, Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}}}
		body, _ := json.Marshal(in)
		rec := httptest.NewRecorder()
		AdmissionHandler(AdmissionConfig{Emulation: true}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ValidateVMPath, bytes.NewReader(body)))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer %s: %v", rec.Body, err)
		}
		return out.Response
	}
	start := func(_, vm *v1.VirtualMachine) { vm.Spec.RunStrategy = v1.RunStrategyPtr(v1.RunStrategyAlways) }
	addVolume := func(_, vm *v1.VirtualMachine) {
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v1.Volume{Name: "extra", VolumeSource: v1.VolumeSource{
			EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}}})
	}
	snapshotting := func(old, vm *v1.VirtualMachine) {
		old.Status.SnapshotInProgress, vm.Status.SnapshotInProgress = ptr("snap"), ptr("snap")
	}
	restoring := func(old, vm *v1.VirtualMachine) {
		old.Status.RestoreInProgress, vm.Status.RestoreInProgress = ptr("restore"), ptr("restore")
	}
	for _, tc := range []struct {
		name  string
		edits []func(old, vm *v1.VirtualMachine)
		want  string // "" admits
	}{
		{"start", []func(old, vm *v1.VirtualMachine){start}, ""},
		{"start while snapshotting", []func(old, vm *v1.VirtualMachine){snapshotting, start}, `Cannot update vm running state until snapshot "snap" completes`},
		{"volume while snapshotting", []func(old, vm *v1.VirtualMachine){snapshotting, addVolume}, `Cannot update vm disks or volumes until snapshot "snap" completes`},
		{"start while restoring", []func(old, vm *v1.VirtualMachine){restoring, start}, `Cannot update VM runStrategy until restore "restore" completes`},
		{"volume while restoring", []func(old, vm *v1.VirtualMachine){restoring, addVolume}, ""},
	} {
		resp := update(func(old, vm *v1.VirtualMachine) {
			for _, e := range tc.edits {
				e(old, vm)
			}
		})
		switch {
		case tc.want == "" && !resp.Allowed:
			t.Errorf("%s: refused: %v", tc.name, resp.Result)
		case tc.want != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tc.want)):
			t.Errorf("%s: allowed %v, %v; want %q", tc.name, resp.Allowed, resp.Result, tc.want)
		}
	}
}
