package virtapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func preset(name string, match map[string]string, domain v1.DomainSpec) v1.VirtualMachineInstancePreset {
	return v1.VirtualMachineInstancePreset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: v1.VirtualMachineInstancePresetSpec{Selector: metav1.LabelSelector{MatchLabels: match}, Domain: &domain}}
}

func TestApplyPresets(t *testing.T) {
	small := preset("small", map[string]string{"size": "small"}, v1.DomainSpec{
		Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
		CPU:       &v1.CPU{Cores: 2},
	})
	efi := preset("efi", map[string]string{"boot": "efi"}, v1.DomainSpec{Firmware: &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{}}}})
	other := preset("other", map[string]string{"size": "large"}, v1.DomainSpec{CPU: &v1.CPU{Cores: 8}})

	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", Labels: map[string]string{"size": "small", "boot": "efi"}}}
	vmi.Spec.Domain.CPU = &v1.CPU{Cores: 4} // the VMI's own value wins
	applied, err := ApplyPresets(vmi, []v1.VirtualMachineInstancePreset{small, efi, other})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(applied, ",") != "efi,small" {
		t.Errorf("applied %v, want efi and small", applied)
	}
	d := vmi.Spec.Domain
	if d.CPU.Cores != 4 || d.Resources.Requests.Memory().String() != "128Mi" || d.Firmware == nil || d.Firmware.Bootloader.EFI == nil {
		t.Errorf("domain after presets: cpu %+v requests %v firmware %+v", d.CPU, d.Resources.Requests, d.Firmware)
	}
	if vmi.Annotations[PresetAnnotationPrefix+"small"] != "kubevirt.io/v1" || vmi.Annotations[PresetAnnotationPrefix+"efi"] != "kubevirt.io/v1" || len(vmi.Annotations) != 2 {
		t.Errorf("annotations %v", vmi.Annotations)
	}

	excluded := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{"size": "small"},
		Annotations: map[string]string{PresetExcludeAnnotation: "true"}}}
	if applied, _ := ApplyPresets(excluded, []v1.VirtualMachineInstancePreset{small}); len(applied) != 0 || excluded.Spec.Domain.CPU != nil {
		t.Errorf("an excluded VMI got presets %v", applied)
	}

	clash := preset("clash", map[string]string{"size": "small"}, v1.DomainSpec{CPU: &v1.CPU{Cores: 1}})
	if _, err := ApplyPresets(vmi.DeepCopy(), []v1.VirtualMachineInstancePreset{small, clash}); err == nil || !strings.Contains(err.Error(), `presets "small" and "clash" conflict: cpu`) {
		t.Errorf("conflicting presets: %v", err)
	}
}

func TestPresetHandlerPatches(t *testing.T) {
	small := preset("small", map[string]string{"size": "small"}, v1.DomainSpec{CPU: &v1.CPU{Cores: 2}})
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", Labels: map[string]string{"size": "small"}}}
	raw, _ := json.Marshal(vmi)
	in, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: "req-1", Operation: admissionv1.Create, Namespace: "ns", Object: runtime.RawExtension{Raw: raw}},
	})
	rec := httptest.NewRecorder()
	PresetHandler(func(ns string) ([]v1.VirtualMachineInstancePreset, error) {
		return []v1.VirtualMachineInstancePreset{small}, nil
	}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, MutateVMIPath, bytes.NewReader(in)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed {
		t.Fatalf("answer %s (%v)", rec.Body, err)
	}
	var ops []struct {
		Op, Path string
		Value    json.RawMessage
	}
	if err := json.Unmarshal(out.Response.Patch, &ops); err != nil || len(ops) != 2 {
		t.Fatalf("patch %s (%v)", out.Response.Patch, err)
	}
	var domain v1.DomainSpec
	var annotations map[string]string
	if ops[0].Path != "/spec/domain" || json.Unmarshal(ops[0].Value, &domain) != nil || domain.CPU == nil || domain.CPU.Cores != 2 {
		t.Errorf("first op %s %s %s, want the domain with 2 cores", ops[0].Op, ops[0].Path, ops[0].Value)
	}
	if ops[1].Path != "/metadata/annotations" || json.Unmarshal(ops[1].Value, &annotations) != nil || annotations[PresetAnnotationPrefix+"small"] != "kubevirt.io/v1" {
		t.Errorf("second op %s %s %s, want the preset's annotation", ops[1].Op, ops[1].Path, ops[1].Value)
	}
	if len(out.Response.Warnings) != 1 || out.Response.Warnings[0] != PresetDeprecationWarning {
		t.Errorf("warnings %q", out.Response.Warnings)
	}
}
