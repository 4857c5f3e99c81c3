package domainxml

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirtxml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// newVMI returns a VMI that converts: a name, a UID and 128Mi of memory,
// changed by each mutate function in turn.
func newVMI(mutate ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "11111111-2222-4333-8444-555555555555"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
		}},
	}
	for _, m := range mutate {
		m(vmi)
	}
	return vmi
}

// step is one converter method, as a method expression.
type step = func(*converter) error

// runSteps runs the given converters (and only those) on vmi, as Convert
// would, and returns the partial domain.
func runSteps(t *testing.T, vmi *v1.VirtualMachineInstance, opts Options, steps ...step) (*libvirtxml.Domain, error) {
	t.Helper()
	c, err := newConverter(vmi, &opts)
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		if err := s(c); err != nil {
			return nil, err
		}
	}
	return c.dom, nil
}

// checkErr fails the test unless err matches want: nil for no error, else
// a *FieldError whose text contains want.
func checkErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return true
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v, want a *FieldError containing %q", err, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
