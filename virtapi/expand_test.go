package virtapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestExpandSpec(t *testing.T) {
	small := &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "ns"},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: 2},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("256Mi")},
		},
	}
	vm := testVM(v1.RunStrategyAlways)
	vm.Spec.Instancetype = &v1.InstancetypeMatcher{Name: "small", Kind: "VirtualMachineInstancetype"}
	ts := newTestServer(t, nil, vm, small)

	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Prefix+"/namespaces/ns/virtualmachines/vm/expand-spec", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("expand-spec: %d %s", rec.Code, rec.Body)
	}
	var got v1.VirtualMachine
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	d := got.Spec.Template.Spec.Domain
	if got.Spec.Instancetype != nil || d.CPU == nil || d.CPU.Sockets*max(d.CPU.Cores, 1)*max(d.CPU.Threads, 1) != 2 ||
		d.Memory == nil || d.Memory.Guest == nil || d.Memory.Guest.String() != "256Mi" {
		t.Fatalf("expanded VM: instancetype %v, cpu %+v, memory %+v; want the matcher gone, 2 vCPUs and 256Mi", got.Spec.Instancetype, d.CPU, d.Memory)
	}

	// A template that sets what the instance type sets is a 400 naming both.
	vm.Spec.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 4}
	ts = newTestServer(t, nil, vm, small)
	code, st := ts.do(t, http.MethodGet, "/namespaces/ns/virtualmachines/vm/expand-spec", "")
	if code != http.StatusBadRequest || !strings.Contains(st.Message, "spec.template.spec.domain.cpu.sockets") || !strings.Contains(st.Message, "spec.cpu.guest") {
		t.Fatalf("expand-spec of a conflicting VM: %d %q", code, st.Message)
	}

	// A missing instance type is a 404.
	ts = newTestServer(t, nil, vm)
	if code, _ := ts.do(t, http.MethodGet, "/namespaces/ns/virtualmachines/vm/expand-spec", ""); code != http.StatusNotFound {
		t.Fatalf("expand-spec naming a missing instance type: %d, want 404", code)
	}
}
