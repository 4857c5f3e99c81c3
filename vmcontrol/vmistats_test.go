package vmcontrol

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
)

// gather returns the samples of the collector's families by their label
// values, in kubevirt_vmi_info's and kubevirt_vmi_phase_count's order.
func gather(t *testing.T, c prometheus.Collector) map[string][]map[string]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{"value": strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64)}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], l)
		}
	}
	return out
}

// kubevirt_vmi_info has one series per VMI with KubeVirt's labels; the
// VMIs per node, phase and info labels are kubevirt_vmi_phase_count.
func TestVMICollector(t *testing.T) {
	live := v1.EvictionStrategyLiveMigrate
	vmis := cache.NewStore(cache.MetaNamespaceKeyFunc)
	running := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fedora", UID: "uid-1",
			Annotations: map[string]string{"vm.kubevirt.io/os": "fedora", "vm.kubevirt.io/workload": "server", "vm.kubevirt.io/flavor": "small",
				v1.InstancetypeAnnotation: "u1.small"},
			Labels: map[string]string{outdatedLauncherLabel: ""}},
		Spec: v1.VirtualMachineInstanceSpec{EvictionStrategy: &live},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01", Machine: &v1.Machine{Type: "pc-q35-9.0"},
			GuestOSInfo: v1.VirtualMachineInstanceGuestOSInfo{Name: "Fedora Linux", VersionID: "40", KernelRelease: "6.8.5", Machine: "x86_64"}},
	}
	pending := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new", UID: "uid-2"},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Pending}}
	pending2 := pending.DeepCopy()
	pending2.Name, pending2.UID = "new2", "uid-3"
	for _, v := range []*v1.VirtualMachineInstance{running, pending, pending2} {
		if err := vmis.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := pods.AddIndexers(cache.Indexers{podindex.Name: func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Labels[v1.CreatedByLabel]}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-fedora-old", Labels: map[string]string{v1.CreatedByLabel: "uid-1"}},
			Spec: corev1.PodSpec{NodeName: "node01"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-fedora-abcde", Labels: map[string]string{v1.CreatedByLabel: "uid-1"}},
			Spec: corev1.PodSpec{NodeName: "node01"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	} {
		if err := pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c := newVMICollector()
	if got := gather(t, c); len(got) != 0 {
		t.Errorf("metrics while the controllers do not run: %v", got)
	}
	c.watch(vmis, pods)
	got := gather(t, c)
	none := map[string]string{"os": "", "workload": "", "flavor": "", "instance_type": "", "preference": "",
		"guest_os_kernel_release": "", "guest_os_machine": "", "guest_os_arch": "", "guest_os_name": "", "guest_os_version_id": ""}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	fedora := with(none, "os", "fedora", "workload", "server", "flavor", "small", "instance_type", "<other>",
		"guest_os_kernel_release", "6.8.5", "guest_os_machine", "pc-q35-9.0", "guest_os_arch", "x86_64", "guest_os_name", "Fedora Linux", "guest_os_version_id", "40")
	want := map[string][]map[string]string{
		"kubevirt_vmi_info": {
			with(fedora, "value", "1", "node", "node01", "namespace", "ns", "name", "fedora", "phase", "running",
				"evictable", "false", "outdated", "true", "vmi_pod", "virt-launcher-fedora-abcde"),
			with(none, "value", "1", "node", "", "namespace", "ns", "name", "new", "phase", "pending", "evictable", "true", "outdated", "false", "vmi_pod", ""),
			with(none, "value", "1", "node", "", "namespace", "ns", "name", "new2", "phase", "pending", "evictable", "true", "outdated", "false", "vmi_pod", ""),
		},
		"kubevirt_vmi_phase_count": {
			with(none, "value", "2", "node", "", "phase", "pending"),
			with(fedora, "value", "1", "node", "node01", "phase", "running"),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("VMI metrics (-want +got):\n%s", diff)
	}
	c.watch(nil, nil)
	if got := gather(t, c); len(got) != 0 {
		t.Errorf("metrics after the controllers stopped: %v", got)
	}
}
