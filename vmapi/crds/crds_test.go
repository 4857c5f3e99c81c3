package crds_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmkit/vmkit/vmapi/crds"
)

func TestCRDShapes(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	kv := []string{"all", "kubevirt"}
	it := []string{"all"}
	want := map[string]struct {
		kind       string
		shortNames []string
		categories []string
		columns    []string
		cluster    bool
		// status: a status subresource (KubeVirt's VMI CRD has none).
		status, scale bool
	}{
		crds.VirtualMachine:                    {"VirtualMachine", []string{"vm", "vms"}, kv, []string{"Age", "Status", "Ready"}, false, true, false},
		crds.VirtualMachineInstance:            {"VirtualMachineInstance", []string{"vmi", "vmis"}, kv, []string{"Age", "Phase", "IP", "NodeName", "Ready", "Live-Migratable", "Paused"}, false, false, false},
		crds.VirtualMachineInstanceReplicaSet:  {"VirtualMachineInstanceReplicaSet", []string{"vmirs", "vmirss"}, kv, []string{"Desired", "Current", "Ready", "Age"}, false, true, true},
		crds.VirtualMachineInstanceMigration:   {"VirtualMachineInstanceMigration", []string{"vmim", "vmims"}, kv, []string{"Phase", "VMI"}, false, true, false},
		crds.KubeVirt:                          {"KubeVirt", []string{"kv", "kvs"}, kv, []string{"Age", "Phase"}, false, true, false},
		crds.VirtualMachineInstancePreset:      {"VirtualMachineInstancePreset", []string{"vmipreset", "vmipresets"}, it, nil, false, false, false},
		crds.VirtualMachineInstancetype:        {"VirtualMachineInstancetype", []string{"vminstancetype", "vminstancetypes", "vmf", "vmfs"}, it, []string{"CPU", "Memory", "Age"}, false, false, false},
		crds.VirtualMachineClusterInstancetype: {"VirtualMachineClusterInstancetype", []string{"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"}, nil, []string{"CPU", "Memory", "Age"}, true, false, false},
		crds.VirtualMachinePreference:          {"VirtualMachinePreference", []string{"vmpref", "vmprefs", "vmp", "vmps"}, it, nil, false, false, false},
		crds.VirtualMachineClusterPreference:   {"VirtualMachineClusterPreference", []string{"vmcp", "vmcps"}, nil, nil, true, false, false},
		crds.VirtualMachinePool:                {"VirtualMachinePool", []string{"vmpool", "vmpools"}, it, []string{"Desired", "Current", "Ready", "Age"}, false, true, true},
	}
	if len(all) != len(want) {
		t.Fatalf("got %d CRDs, want %d", len(all), len(want))
	}
	for _, crd := range all {
		w, ok := want[crd.Name]
		if !ok {
			t.Errorf("unexpected CRD %s", crd.Name)
			continue
		}
		group, scope := "kubevirt.io", apiextensionsv1.NamespaceScoped
		if g, ok := strings.CutPrefix(crd.Name, crd.Spec.Names.Plural+"."); ok && g != "kubevirt.io" {
			group = g
		}
		if w.cluster {
			scope = apiextensionsv1.ClusterScoped
		}
		if crd.Spec.Group != group || crd.Spec.Names.Kind != w.kind || crd.Spec.Scope != scope {
			t.Errorf("%s: group %q kind %q scope %q", crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Scope)
		}
		if diff := cmp.Diff(w.shortNames, crd.Spec.Names.ShortNames); diff != "" {
			t.Errorf("%s short names (-want +got):\n%s", crd.Name, diff)
		}
		if diff := cmp.Diff(w.categories, crd.Spec.Names.Categories); diff != "" {
			t.Errorf("%s categories (-want +got):\n%s", crd.Name, diff)
		}
		v1 := crd.Spec.Versions[0]
		if group == "kubevirt.io" {
			if len(crd.Spec.Versions) != 2 {
				t.Fatalf("%s: want versions v1 and v1alpha3, got %d", crd.Name, len(crd.Spec.Versions))
			}
			old := crd.Spec.Versions[1]
			if v1.Name != "v1" || !v1.Served || !v1.Storage {
				t.Errorf("%s: v1 must be served and stored: %+v", crd.Name, v1.Name)
			}
			if old.Name != "v1alpha3" || !old.Served || old.Storage || !old.Deprecated {
				t.Errorf("%s: v1alpha3 must be served, deprecated, not stored", crd.Name)
			}
			if diff := cmp.Diff(v1.Schema, old.Schema); diff != "" {
				t.Errorf("%s: v1alpha3 schema differs from v1:\n%s", crd.Name, diff)
			}
		} else if len(crd.Spec.Versions) != 1 || v1.Name != "v1beta1" || !v1.Served || !v1.Storage {
			t.Errorf("%s: want only v1beta1, served and stored", crd.Name)
		}
		var cols []string
		for _, c := range v1.AdditionalPrinterColumns {
			cols = append(cols, c.Name)
		}
		if diff := cmp.Diff(w.columns, cols); diff != "" {
			t.Errorf("%s printer columns (-want +got):\n%s", crd.Name, diff)
		}
		if got := v1.Subresources != nil && v1.Subresources.Status != nil; got != w.status {
			t.Errorf("%s: status subresource %v, want %v", crd.Name, got, w.status)
		}
		if got := v1.Subresources != nil && v1.Subresources.Scale != nil; got != w.scale {
			t.Errorf("%s: scale subresource %v, want %v", crd.Name, got, w.scale)
		}
	}
}

func TestGetUnknownCRD(t *testing.T) {
	if _, err := crds.Get("pets.example.com"); err == nil {
		t.Fatal("want an error for a CRD vmkit does not ship")
	}
	crd, err := crds.Get(crds.VirtualMachine)
	if err != nil || crd.Spec.Names.Plural != "virtualmachines" {
		t.Fatalf("Get(%s) = %v, %v", crds.VirtualMachine, crd, err)
	}
}

func BenchmarkAll(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := crds.All(); err != nil {
			b.Fatal(err)
		}
	}
}
