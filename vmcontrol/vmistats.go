package vmcontrol

import (
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
)

// KubeVirt's names the VMI metrics read.
const (
	// vmAnnotationPrefix starts the annotations the VM templates of
	// KubeVirt's common templates set: vm.kubevirt.io/os, workload, flavor.
	vmAnnotationPrefix = "vm.kubevirt.io/"
	// outdatedLauncherLabel marks a VMI whose launcher runs an older
	// image than the installed version's.
	outdatedLauncherLabel = "kubevirt.io/outdatedLauncherImage"
	// otherValue stands for an instance type or preference KubeVirt does
	// not name in its metrics (one not from a known vendor).
	otherValue = "<other>"
)

// vmiInfoLabels are kubevirt_vmi_info's labels, KubeVirt's.
var vmiInfoLabels = []string{
	"node", "namespace", "name",
	"phase", "os", "workload", "flavor",
	"instance_type", "preference",
	"guest_os_kernel_release", "guest_os_machine", "guest_os_arch", "guest_os_name", "guest_os_version_id",
	"evictable", "outdated",
	"vmi_pod",
}

// phaseCountLabels are kubevirt_vmi_phase_count's: what KubeVirt's
// recording rule of that name sums kubevirt_vmi_info by.
var phaseCountLabels = []string{
	"node", "phase", "os", "workload", "flavor", "instance_type", "preference",
	"guest_os_kernel_release", "guest_os_machine", "guest_os_arch", "guest_os_name", "guest_os_version_id",
}

// vmiCollector exports kubevirt_vmi_info (one series per VMI, as KubeVirt's
// virt-controller) and kubevirt_vmi_phase_count (VMIs per node, phase and
// the other info labels but namespace, name and pod: KubeVirt's recording
// rule of that name, exported directly so that a Prometheus without the
// rule has it) from the Manager's caches when Prometheus scrapes. It exports
// nothing while the Manager does not run the controllers (a standby under
// leader election), so the leader's are the only series.
type vmiCollector struct {
	info, phaseCount *prometheus.Desc

	mu   sync.Mutex
	vmis cache.Store   // nil while the controllers do not run
	pods cache.Indexer // launcher pods, indexed by podindex
}

func newVMICollector() *vmiCollector {
	return &vmiCollector{
		info: prometheus.NewDesc("kubevirt_vmi_info", "Information about VirtualMachineInstances.", vmiInfoLabels, nil),
		phaseCount: prometheus.NewDesc("kubevirt_vmi_phase_count",
			"Sum of VMIs per phase and node. `phase` can be one of the following: [`Pending`, `Scheduling`, `Scheduled`, `Running`, `Succeeded`, `Failed`, `Unknown`].",
			phaseCountLabels, nil),
	}
}

// watch makes the collector read vmis and pods (nil: stop).
func (c *vmiCollector) watch(vmis cache.Store, pods cache.Indexer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vmis, c.pods = vmis, pods
}

// Describe implements prometheus.Collector.
func (c *vmiCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.phaseCount
}

// Collect implements prometheus.Collector.
func (c *vmiCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	vmis, pods := c.vmis, c.pods
	c.mu.Unlock()
	if vmis == nil {
		return
	}
	counts := map[string]float64{}
	var keys [][]string
	for _, obj := range vmis.List() {
		vmi, ok := obj.(*v1.VirtualMachineInstance)
		if !ok {
			continue
		}
		info := vmiInfo(vmi, pods)
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, info...)
		group := phaseCountOf(info)
		k := strings.Join(group, "\x00")
		if _, seen := counts[k]; !seen {
			keys = append(keys, group)
		}
		counts[k]++
	}
	for _, group := range keys {
		ch <- prometheus.MustNewConstMetric(c.phaseCount, prometheus.GaugeValue, counts[strings.Join(group, "\x00")], group...)
	}
}

// vmiInfo returns kubevirt_vmi_info's label values for vmi, as KubeVirt
// computes them: the phase in lower case; os, workload and flavor from the
// vm.kubevirt.io/ annotations; the instance type and preference as
// <other> when the VMI names one (KubeVirt names only those of known
// vendors, which vmkit does not look up); the guest OS from
// status.guestOSInfo and the machine type from status.machine; evictable
// false for a VMI whose eviction strategy is LiveMigrate but that is not
// LiveMigratable; outdated when the VMI carries
// kubevirt.io/outdatedLauncherImage; vmi_pod the Running launcher pod on
// the VMI's node.
func vmiInfo(vmi *v1.VirtualMachineInstance, pods cache.Indexer) []string {
	a := vmi.Annotations
	named := func(keys ...string) string {
		for _, k := range keys {
			if a[k] != "" {
				return otherValue
			}
		}
		return ""
	}
	machine := ""
	if vmi.Status.Machine != nil {
		machine = vmi.Status.Machine.Type
	}
	g := vmi.Status.GuestOSInfo
	_, outdated := vmi.Labels[outdatedLauncherLabel]
	return []string{
		vmi.Status.NodeName, vmi.Namespace, vmi.Name,
		strings.ToLower(string(vmi.Status.Phase)), a[vmAnnotationPrefix+"os"], a[vmAnnotationPrefix+"workload"], a[vmAnnotationPrefix+"flavor"],
		named(v1.InstancetypeAnnotation, v1.ClusterInstancetypeAnnotation), named(v1.PreferenceAnnotation, v1.ClusterPreferenceAnnotation),
		g.KernelRelease, machine, g.Machine, g.Name, g.VersionID,
		strconv.FormatBool(evictable(vmi)), strconv.FormatBool(outdated),
		runningPod(vmi, pods),
	}
}

// phaseCountOf picks kubevirt_vmi_phase_count's labels out of
// kubevirt_vmi_info's.
func phaseCountOf(info []string) []string {
	out := make([]string, 0, len(phaseCountLabels))
	for _, l := range phaseCountLabels {
		for i, il := range vmiInfoLabels {
			if il == l {
				out = append(out, info[i])
			}
		}
	}
	return out
}

// evictable is KubeVirt's: a VMI that must live-migrate when its node is
// drained is evictable only while it is LiveMigratable.
func evictable(vmi *v1.VirtualMachineInstance) bool {
	s := vmi.Spec.EvictionStrategy
	if s == nil || *s != v1.EvictionStrategyLiveMigrate {
		return true
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceIsMigratable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// runningPod is the name of the VMI's Running launcher pod on its node, or "".
func runningPod(vmi *v1.VirtualMachineInstance, pods cache.Indexer) string {
	if pods == nil {
		return ""
	}
	ps, err := podindex.Of(pods, vmi)
	if err != nil {
		return ""
	}
	for _, p := range ps {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == vmi.Status.NodeName && p.Spec.NodeName != "" {
			return p.Name
		}
	}
	return ""
}

var _ prometheus.Collector = (*vmiCollector)(nil)
