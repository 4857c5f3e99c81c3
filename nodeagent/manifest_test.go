package nodeagent_test

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestVMTinyManifest checks that examples/vm-tiny.yaml, the demo's VM,
// decodes strictly, validates, and asks for the same guest as the
// integration test boots.
func TestVMTinyManifest(t *testing.T) {
	b, err := os.ReadFile("../examples/vm-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vm v1.VirtualMachine
	if err := yaml.UnmarshalStrict(b, &vm); err != nil {
		t.Fatalf("examples/vm-tiny.yaml: %v", err)
	}
	if errs := v1.ValidateVirtualMachine(&vm); len(errs) > 0 {
		t.Fatalf("examples/vm-tiny.yaml: %v", errs.ToAggregate())
	}
	want := tinyVM("", "", v1.RunStrategyAlways).Spec.Template.Spec
	got := vm.Spec.Template.Spec
	got.Domain.Firmware.KernelBoot.Container.Image = guestImage
	got.Domain.Firmware.KernelBoot.Container.ImagePullPolicy = ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("examples/vm-tiny.yaml differs from the integration test's guest (-test +example):\n%s", diff)
	}
}
