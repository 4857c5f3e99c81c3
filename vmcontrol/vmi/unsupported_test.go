package vmi

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestUnsupportedGetsNoPodAndIsReported: a VMI asking for a GPU and a
// sound card (accepted by the API, which vmkit cannot give) stays Pending without a
// launcher, with Synchronized=False reason Unsupported and a warning event
// both naming the fields; it is not retried.
func TestUnsupportedGetsNoPodAndIsReported(t *testing.T) {
	vmi := newVMI("")
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	vmi.Spec.Domain.Devices.GPUs = []v1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/TU104GL_Tesla_T4"}}
	vmi.Spec.Domain.Devices.Sound = &v1.SoundDevice{Name: "audio"}
	h := newClaimHarness(t, fakeRenderer{}, vmi)
	h.c.validate = func(vmi *v1.VirtualMachineInstance) field.ErrorList { return domainxml.Validate(vmi, true) }
	if err := h.c.sync(context.Background(), "ns/vmi"); err != nil {
		t.Fatalf("an unsupported spec must not be retried: %v", err)
	}
	if pods, _ := h.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("a VMI vmkit cannot run got %d launcher pods", len(pods.Items))
	}
	got := h.vmi(t)
	c := got.VMICondition(v1.VirtualMachineInstanceSynchronized)
	if got.Status.Phase != v1.Pending || c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonUnsupported ||
		!strings.Contains(c.Message, "spec.domain.devices.gpus") || !strings.Contains(c.Message, "spec.domain.devices.sound") {
		t.Fatalf("phase %q condition %+v; want Pending, Synchronized=False reason Unsupported naming gpus and sound", got.Status.Phase, c)
	}
	events := h.drainEvents()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning Unsupported ") || !strings.Contains(events[0], "spec.domain.devices.gpus") {
		t.Fatalf("events %q, want one Warning Unsupported naming spec.domain.devices.gpus", events)
	}
}
