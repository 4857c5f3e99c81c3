package podtemplate

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestPodLabels(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Name: "vm", UID: "u1",
		Labels: map[string]string{"app": "web", "team": "vmi", v1.AppLabel: "spoofed", v1.CreatedByLabel: "spoofed",
			// Reserved: the controllers' own.
			v1.MigrationJobLabel: "x", v1.NodeNameLabel: "node01", v1.MigrationTargetNodeNameLabel: "node02",
			// Users' kubevirt.io/ labels, which Services select on, as in KubeVirt.
			"kubevirt.io/vm": "web", "kubevirt.io/domain": "web", "kubevirt.io/size": "small"},
	}}
	users := map[string]string{"kubevirt.io/vm": "web", "kubevirt.io/domain": "web", "kubevirt.io/size": "small"}
	tests := []struct {
		name  string
		extra map[string]string
		host  string
		want  map[string]string
	}{
		{"the VMI's labels but the reserved ones, the launcher's own win", nil, "vm", map[string]string{
			"app": "web", "team": "vmi", "kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "u1", "vm.kubevirt.io/name": "vm"}},
		{"extra labels override the VMI's", map[string]string{"team": "platform", "tier": "gold"}, "guest", map[string]string{
			"app": "web", "team": "platform", "tier": "gold", "kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "u1", "vm.kubevirt.io/name": "guest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maps.Copy(tt.want, users)
			if diff := cmp.Diff(tt.want, podLabels(vmi, tt.extra, tt.host, 0)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodAnnotations(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Name: "vm",
		Annotations: map[string]string{
			"example.com/owner": "team",
			"kubectl.kubernetes.io/last-applied-configuration": "{}",
			"kubevirt.io/latest-observed-api-version":          "v1",
			"kubevirt.io/storage-observed-api-version":         "v1",
			v1.DomainAnnotation:                                "spoofed",
			"kubevirt.io/migrationJobName":                     "spoofed",
			// AppArmor and seccomp: the renderer's profiles stand.
			"container.apparmor.security.beta.kubernetes.io/compute": "unconfined",
			"seccomp.security.alpha.kubernetes.io/pod":               "unconfined",
			"container.seccomp.security.alpha.kubernetes.io/compute": "unconfined",
			// KubeVirt's VMI settings are copied, as KubeVirt copies them.
			"kubevirt.io/keep-launcher-alive-after-failure": "true",
		},
	}}
	want := map[string]string{
		"example.com/owner": "team", "example.com/extra": "x", "kubevirt.io/keep-launcher-alive-after-failure": "true",
		"kubevirt.io/domain": "vm", "kubectl.kubernetes.io/default-container": "compute",
	}
	if diff := cmp.Diff(want, podAnnotations(vmi, map[string]string{"example.com/extra": "x"}, 0)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestReservedMetadataNotInherited (#35, N11): a VMI labelled
// kubevirt.io/migrationJobUID=x and annotated kubevirt.io/migrationJobName
// and AppArmor unconfined renders a launch pod without them (the migration
// controller would take it for that migration's target); a migration
// target pod carries its own migration's, not the VMI's.
func TestReservedMetadataNotInherited(t *testing.T) {
	r := newTestRenderer(t, nil)
	vmi := minimalVMI()
	vmi.Labels = map[string]string{v1.MigrationJobLabel: "x", "kubevirt.io/vm": "vm"}
	vmi.Annotations = map[string]string{"kubevirt.io/migrationJobName": "x", "container.apparmor.security.beta.kubernetes.io/compute": "unconfined"}
	pod, err := r.RenderLaunchPod(vmi)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		for _, k := range []string{v1.MigrationJobLabel, "kubevirt.io/migrationJobName", "container.apparmor.security.beta.kubernetes.io/compute"} {
			if v, ok := m[k]; ok {
				t.Errorf("the launch pod has the VMI's %s=%s", k, v)
			}
		}
	}
	if pod.Labels["kubevirt.io/vm"] != "vm" {
		t.Errorf("the VMI's label kubevirt.io/vm, which Services select on, is missing: %v", pod.Labels)
	}
	migration := &v1.VirtualMachineInstanceMigration{}
	migration.Name, migration.Namespace, migration.UID, migration.Spec.VMIName = "mig", "ns", "m1", "vm"
	target, err := r.RenderMigrationTargetPod(vmi, migration)
	if err != nil {
		t.Fatal(err)
	}
	if target.Labels[v1.MigrationJobLabel] != "m1" || target.Annotations["kubevirt.io/migrationJobName"] != "mig" {
		t.Errorf("the target pod's migration: %s=%q, %s=%q; want m1, mig", v1.MigrationJobLabel, target.Labels[v1.MigrationJobLabel],
			"kubevirt.io/migrationJobName", target.Annotations["kubevirt.io/migrationJobName"])
	}
}

func TestControllerRef(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", UID: "u1"}}
	yes := true
	want := []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "vm", UID: "u1", Controller: &yes, BlockOwnerDeletion: &yes}}
	got := controllerRef(vmi)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if metav1.GetControllerOf(&metav1.ObjectMeta{OwnerReferences: got}) == nil {
		t.Error("not recognised as a controller reference")
	}
}

func TestNetworkAnnotations(t *testing.T) {
	pod := v1.NetworkSource{Pod: &v1.PodNetwork{}}
	multus := func(name string, def bool) v1.NetworkSource {
		return v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: name, Default: def}}
	}
	tests := []struct {
		name              string
		networks          []v1.Network
		ifaces            []v1.Interface
		wantNets, wantDef string
		wantErr           string
	}{
		{"pod network only", []v1.Network{{Name: "default", NetworkSource: pod}}, nil, "", "", ""},
		{"secondary networks, KubeVirt's interface names, MAC requests",
			[]v1.Network{{Name: "default", NetworkSource: pod}, {Name: "blue", NetworkSource: multus("blue-net", false)}, {Name: "red", NetworkSource: multus("infra/red-net", false)}},
			[]v1.Interface{{Name: "blue", MacAddress: "02:00:00:00:00:01"}, {Name: "red"}},
			`[{"name":"blue-net","namespace":"ns","mac":"02:00:00:00:00:01","interface":"pod16477688c0e"},{"name":"red-net","namespace":"infra","interface":"podb1f51a511f1"}]`, "", ""},
		{"default network", []v1.Network{{Name: "main", NetworkSource: multus("ovn", true)}}, nil, "", "ovn", ""},
		{"bad name", []v1.Network{{Name: "x", NetworkSource: multus("a/b/c", false)}}, nil, "", "",
			`VirtualMachineInstance ns/vm: spec.networks[0].multus.networkName: "a/b/c" is not <name> or <namespace>/<name>`},
		{"two defaults", []v1.Network{{Name: "x", NetworkSource: multus("a", true)}, {Name: "y", NetworkSource: multus("b", true)}}, nil, "", "",
			"VirtualMachineInstance ns/vm: spec.networks[1].multus.default: a second default network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &guestFacts{ref: objectRef{kind: kindVMI, namespace: "ns", name: "vm"}}
			spec := &v1.VirtualMachineInstanceSpec{Networks: tt.networks}
			spec.Domain.Devices.Interfaces = tt.ifaces
			nets, def, err := networkAnnotations(f, spec, "ns")
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || nets != tt.wantNets || def != tt.wantDef {
				t.Errorf("got %s, %q, %v\nwant %s, %q", nets, def, err, tt.wantNets, tt.wantDef)
			}
		})
	}
}
