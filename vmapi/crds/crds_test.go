package crds_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmkit/vmkit/vmapi/crds"
)

// kubevirtNames are the names KubeVirt gives each CRD vmkit serves: plural,
// singular, kind, short names, categories and scope, as set by
// kubevirt/kubevirt's pkg/virt-operator/resource/generate/components/crds.go
// (NewVirtualMachineCrd, NewVirtualMachineInstanceCrd, NewReplicaSetCrd,
// NewVirtualMachineInstanceMigrationCrd, NewKubeVirtCrd, NewPresetCrd,
// NewVirtualMachinePoolCrd and the four instance type CRDs; the same names in
// v1.8.4 and on main at d923fdb815cd2016ddaebdaaa51db04133576d72), the
// instance type plurals and singulars from
// staging/src/kubevirt.io/api/instancetype/register.go.
// Every kubevirt.io kind is in the category all and in no other: a category
// kubevirt would make `kubectl get kubevirt` list VMs and VMIs, and `kubectl
// patch kubevirt kubevirt` fail with "you must specify only one resource".
// KubeVirt sets no listKind; the API server makes it Kind+"List".
var kubevirtNames = map[string]struct {
	plural, singular, kind string
	shortNames, categories []string
	cluster                bool
}{
	crds.VirtualMachine:                    {"virtualmachines", "virtualmachine", "VirtualMachine", []string{"vm", "vms"}, []string{"all"}, false},
	crds.VirtualMachineInstance:            {"virtualmachineinstances", "virtualmachineinstance", "VirtualMachineInstance", []string{"vmi", "vmis"}, []string{"all"}, false},
	crds.VirtualMachineInstanceReplicaSet:  {"virtualmachineinstancereplicasets", "virtualmachineinstancereplicaset", "VirtualMachineInstanceReplicaSet", []string{"vmirs", "vmirss"}, []string{"all"}, false},
	crds.VirtualMachineInstanceMigration:   {"virtualmachineinstancemigrations", "virtualmachineinstancemigration", "VirtualMachineInstanceMigration", []string{"vmim", "vmims"}, []string{"all"}, false},
	crds.KubeVirt:                          {"kubevirts", "kubevirt", "KubeVirt", []string{"kv", "kvs"}, []string{"all"}, false},
	crds.VirtualMachineInstancePreset:      {"virtualmachineinstancepresets", "virtualmachineinstancepreset", "VirtualMachineInstancePreset", []string{"vmipreset", "vmipresets"}, []string{"all"}, false},
	crds.VirtualMachineInstancetype:        {"virtualmachineinstancetypes", "virtualmachineinstancetype", "VirtualMachineInstancetype", []string{"vminstancetype", "vminstancetypes", "vmf", "vmfs"}, []string{"all"}, false},
	crds.VirtualMachineClusterInstancetype: {"virtualmachineclusterinstancetypes", "virtualmachineclusterinstancetype", "VirtualMachineClusterInstancetype", []string{"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"}, nil, true},
	crds.VirtualMachinePreference:          {"virtualmachinepreferences", "virtualmachinepreference", "VirtualMachinePreference", []string{"vmpref", "vmprefs", "vmp", "vmps"}, []string{"all"}, false},
	crds.VirtualMachineClusterPreference:   {"virtualmachineclusterpreferences", "virtualmachineclusterpreference", "VirtualMachineClusterPreference", []string{"vmcp", "vmcps"}, nil, true},
	crds.VirtualMachinePool:                {"virtualmachinepools", "virtualmachinepool", "VirtualMachinePool", []string{"vmpool", "vmpools"}, []string{"all"}, false},
	crds.VirtualMachineExport:              {"virtualmachineexports", "virtualmachineexport", "VirtualMachineExport", []string{"vmexport", "vmexports"}, []string{"all"}, false},
	crds.VirtualMachineSnapshot:            {"virtualmachinesnapshots", "virtualmachinesnapshot", "VirtualMachineSnapshot", []string{"vmsnapshot", "vmsnapshots"}, []string{"all"}, false},
	crds.VirtualMachineSnapshotContent:     {"virtualmachinesnapshotcontents", "virtualmachinesnapshotcontent", "VirtualMachineSnapshotContent", []string{"vmsnapshotcontent", "vmsnapshotcontents"}, []string{"all"}, false},
	crds.VirtualMachineRestore:             {"virtualmachinerestores", "virtualmachinerestore", "VirtualMachineRestore", []string{"vmrestore", "vmrestores"}, []string{"all"}, false},
}

// TestCRDNamesAreKubeVirts: every CRD has KubeVirt's name, plural, singular,
// kind, short names, categories and scope, so KubeVirt's documented kubectl
// commands resolve as they do on KubeVirt.
func TestCRDNamesAreKubeVirts(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(kubevirtNames) {
		t.Errorf("got %d CRDs, KubeVirt has %d of the kinds vmkit serves", len(all), len(kubevirtNames))
	}
	for _, crd := range all {
		kv, ok := kubevirtNames[crd.Name]
		if !ok {
			t.Errorf("CRD %s is not one of KubeVirt's", crd.Name)
			continue
		}
		want := apiextensionsv1.CustomResourceDefinitionNames{
			Plural: kv.plural, Singular: kv.singular, Kind: kv.kind, ListKind: kv.kind + "List",
			ShortNames: kv.shortNames, Categories: kv.categories,
		}
		if diff := cmp.Diff(want, crd.Spec.Names); diff != "" {
			t.Errorf("CRD %s: names differ from KubeVirt's (-KubeVirt +vmkit):\n%s", crd.Name, diff)
		}
		if crd.Name != kv.plural+"."+crd.Spec.Group {
			t.Errorf("CRD %s: name is not <plural>.<group> (%s.%s)", crd.Name, kv.plural, crd.Spec.Group)
		}
		scope := apiextensionsv1.NamespaceScoped
		if kv.cluster {
			scope = apiextensionsv1.ClusterScoped
		}
		if crd.Spec.Scope != scope {
			t.Errorf("CRD %s: scope %s, KubeVirt's is %s", crd.Name, crd.Spec.Scope, scope)
		}
	}
}

func TestCRDShapes(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	// Names, short names, categories and scope: TestCRDNamesAreKubeVirts.
	want := map[string]struct {
		columns []string
		// status: a status subresource (KubeVirt's VMI CRD has none).
		status, scale bool
	}{
		crds.VirtualMachine:                    {[]string{"Age", "Status", "Ready"}, true, false},
		crds.VirtualMachineInstance:            {[]string{"Age", "Phase", "IP", "NodeName", "Ready", "Live-Migratable", "Paused"}, false, false},
		crds.VirtualMachineInstanceReplicaSet:  {[]string{"Desired", "Current", "Ready", "Age"}, true, true},
		crds.VirtualMachineInstanceMigration:   {[]string{"Phase", "VMI"}, true, false},
		crds.KubeVirt:                          {[]string{"Age", "Phase"}, true, false},
		crds.VirtualMachineInstancePreset:      {nil, false, false},
		crds.VirtualMachineInstancetype:        {[]string{"CPU", "Memory", "Age"}, false, false},
		crds.VirtualMachineClusterInstancetype: {[]string{"CPU", "Memory", "Age"}, false, false},
		crds.VirtualMachinePreference:          {nil, false, false},
		crds.VirtualMachineClusterPreference:   {nil, false, false},
		crds.VirtualMachinePool:                {[]string{"Desired", "Current", "Ready", "Age"}, true, true},
		crds.VirtualMachineExport:              {[]string{"SourceKind", "SourceName", "Phase"}, true, false},
		crds.VirtualMachineSnapshot:            {[]string{"SourceKind", "SourceName", "Phase", "ReadyToUse", "CreationTime", "Error"}, true, false},
		crds.VirtualMachineSnapshotContent:     {[]string{"ReadyToUse", "CreationTime", "Error"}, true, false},
		crds.VirtualMachineRestore:             {[]string{"TargetKind", "TargetName", "Complete", "RestoreTime"}, true, false},
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
		group, _ := strings.CutPrefix(crd.Name, crd.Spec.Names.Plural+".")
		if crd.Spec.Group != group {
			t.Errorf("%s: group %q", crd.Name, crd.Spec.Group)
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
