package instancetype

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Target is what an expansion writes into: the spec and metadata of a VMI
// (or of a VM's template), and the paths conflicts name them by.
type Target struct {
	Spec *v1.VirtualMachineInstanceSpec
	Meta *metav1.ObjectMeta
	// SpecPath and MetaPath name Spec and Meta in conflicts (spec and
	// metadata when nil).
	SpecPath, MetaPath *field.Path
}

// VMTemplate is the target of a VM's template, whose conflicts are named
// spec.template.spec... and spec.template.metadata...; nil when the VM has
// no template.
func VMTemplate(vm *v1.VirtualMachine) *Target {
	if vm.Spec.Template == nil {
		return nil
	}
	tmpl := field.NewPath("spec", "template")
	return &Target{Spec: &vm.Spec.Template.Spec, Meta: &vm.Spec.Template.ObjectMeta, SpecPath: tmpl.Child("spec"), MetaPath: tmpl.Child("metadata")}
}

// Conflict is a field the VM's template sets that its instance type sets too.
type Conflict struct {
	// Field is the template's field, for example
	// spec.template.spec.domain.cpu.sockets.
	Field *field.Path
	// Instancetype is the instance type's field, for example spec.cpu.guest.
	Instancetype string
}

// Conflicts are the conflicts of one expansion. As an error it reads as
// KubeVirt's ("VM field(s) ... conflicts with selected instance type") and
// names the instance type's fields too.
type Conflicts []Conflict

// Fields are the template's conflicting fields, comma-separated.
func (c Conflicts) Fields() string {
	out := make([]string, len(c))
	for i := range c {
		out[i] = c[i].Field.String()
	}
	return strings.Join(out, ", ")
}

func (c Conflicts) Error() string {
	var its []string
	for _, x := range c {
		if !slices.Contains(its, x.Instancetype) {
			its = append(its, x.Instancetype)
		}
	}
	return fmt.Sprintf("VM field(s) %s conflicts with selected instance type (which sets %s)", c.Fields(), strings.Join(its, ", "))
}

// Apply expands an instance type and a preference (either may be nil) into
// t, as KubeVirt's VM controller does when it creates a VMI. The instance
// type's fields go in unless the target already sets them: each such field
// is a Conflict, and with any conflict nothing of the preference is applied
// (what the instance type did apply stays; the caller drops the target).
// Then the preference fills what is still unset.
func Apply(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) Conflicts {
	if t.SpecPath == nil {
		t.SpecPath = field.NewPath("spec")
	}
	if t.MetaPath == nil {
		t.MetaPath = field.NewPath("metadata")
	}
	if it != nil {
		var c Conflicts
		c = append(c, applyNodeSelector(t, it)...)
		c = append(c, applySchedulerName(t, it)...)
		c = append(c, applyCPU(t, it, pref)...)
		c = append(c, applyMemory(t, it)...)
		c = append(c, applyIOThreads(t, it)...)
		c = append(c, applyLaunchSecurity(t, it)...)
		c = append(c, applyGPUs(t, it)...)
		c = append(c, applyHostDevices(t, it)...)
		c = append(c, applyAnnotations(t, it)...)
		if len(c) > 0 {
			return c
		}
	}
	ApplyPreference(t.Spec, t.Meta, pref)
	return nil
}

func conflict(base *field.Path, itField string, names ...string) Conflict {
	return Conflict{Field: base.Child(names[0], names[1:]...), Instancetype: itField}
}

func applyNodeSelector(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	if it.NodeSelector == nil {
		return nil
	}
	if t.Spec.NodeSelector != nil {
		return Conflicts{conflict(t.SpecPath, "spec.nodeSelector", "nodeSelector")}
	}
	t.Spec.NodeSelector = maps.Clone(it.NodeSelector)
	return nil
}

func applySchedulerName(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	if it.SchedulerName == "" {
		return nil
	}
	if t.Spec.SchedulerName != "" {
		return Conflicts{conflict(t.SpecPath, "spec.schedulerName", "schedulerName")}
	}
	t.Spec.SchedulerName = it.SchedulerName
	return nil
}

func applyCPU(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) Conflicts {
	domain := &t.Spec.Domain
	if domain.CPU == nil {
		domain.CPU = &v1.CPU{}
	}
	cpu, itCPU := domain.CPU, &it.CPU
	var c Conflicts
	const guest = "spec.cpu.guest"
	if _, ok := domain.Resources.Requests[corev1.ResourceCPU]; ok {
		c = append(c, conflict(t.SpecPath, guest, "domain", "resources", "requests", string(corev1.ResourceCPU)))
	}
	if _, ok := domain.Resources.Limits[corev1.ResourceCPU]; ok {
		c = append(c, conflict(t.SpecPath, guest, "domain", "resources", "limits", string(corev1.ResourceCPU)))
	}
	if cpu.Sockets != 0 {
		c = append(c, conflict(t.SpecPath, guest, "domain", "cpu", "sockets"))
	}
	if cpu.Cores != 0 {
		c = append(c, conflict(t.SpecPath, guest, "domain", "cpu", "cores"))
	}
	if cpu.Threads != 0 {
		c = append(c, conflict(t.SpecPath, guest, "domain", "cpu", "threads"))
	}
	if cpu.Model != "" && itCPU.Model != nil {
		c = append(c, conflict(t.SpecPath, "spec.cpu.model", "domain", "cpu", "model"))
	}
	if cpu.DedicatedCPUPlacement && itCPU.DedicatedCPUPlacement != nil {
		c = append(c, conflict(t.SpecPath, "spec.cpu.dedicatedCPUPlacement", "domain", "cpu", "dedicatedCpuPlacement"))
	}
	if cpu.IsolateEmulatorThread && itCPU.IsolateEmulatorThread != nil {
		c = append(c, conflict(t.SpecPath, "spec.cpu.isolateEmulatorThread", "domain", "cpu", "isolateEmulatorThread"))
	}
	if cpu.NUMA != nil && itCPU.NUMA != nil {
		c = append(c, conflict(t.SpecPath, "spec.cpu.numa", "domain", "cpu", "numa"))
	}
	if cpu.Realtime != nil && itCPU.Realtime != nil {
		c = append(c, conflict(t.SpecPath, "spec.cpu.realtime", "domain", "cpu", "realtime"))
	}
	if len(c) > 0 {
		return c
	}
	if itCPU.Model != nil {
		cpu.Model = *itCPU.Model
	}
	if itCPU.DedicatedCPUPlacement != nil {
		cpu.DedicatedCPUPlacement = *itCPU.DedicatedCPUPlacement
	}
	if itCPU.IsolateEmulatorThread != nil {
		cpu.IsolateEmulatorThread = *itCPU.IsolateEmulatorThread
	}
	if itCPU.NUMA != nil {
		cpu.NUMA = itCPU.NUMA.DeepCopy()
	}
	if itCPU.Realtime != nil {
		cpu.Realtime = itCPU.Realtime.DeepCopy()
	}
	if itCPU.MaxSockets != nil {
		cpu.MaxSockets = *itCPU.MaxSockets
	}
	cpu.Sockets, cpu.Cores, cpu.Threads = Topology(itCPU.Guest, pref)
	return nil
}

// Topology is how vcpus are shown to the guest under a preference (nil
// for none): all sockets by default; all cores or all threads; or spread
// over sockets and cores (or cores and threads, or sockets, cores and two
// threads per core) at the preference's ratio, 2 by default.
func Topology(vcpus uint32, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) (sockets, cores, threads uint32) {
	sockets, cores, threads = 1, 1, 1
	if vcpus == 1 {
		return
	}
	switch PreferredTopology(pref) {
	case instancetypev1beta1.DeprecatedPreferCores, instancetypev1beta1.Cores:
		cores = vcpus
	case instancetypev1beta1.DeprecatedPreferThreads, instancetypev1beta1.Threads:
		threads = vcpus
	case instancetypev1beta1.DeprecatedPreferSpread, instancetypev1beta1.Spread:
		ratio, across := SpreadOptions(pref)
		switch across {
		case instancetypev1beta1.SpreadAcrossSocketsCores:
			cores, sockets = ratio, vcpus/ratio
		case instancetypev1beta1.SpreadAcrossCoresThreads:
			threads, cores = ratio, vcpus/ratio
		case instancetypev1beta1.SpreadAcrossSocketsCoresThreads:
			const threadsPerCore = 2
			threads, cores, sockets = threadsPerCore, ratio, vcpus/threadsPerCore/ratio
		}
	default: // sockets and any
		sockets = vcpus
	}
	return sockets, cores, threads
}

// PreferredTopology is a preference's CPU topology, sockets when unset.
func PreferredTopology(pref *instancetypev1beta1.VirtualMachinePreferenceSpec) instancetypev1beta1.PreferredCPUTopology {
	if pref != nil && pref.CPU != nil && pref.CPU.PreferredCPUTopology != nil {
		return *pref.CPU.PreferredCPUTopology
	}
	return instancetypev1beta1.Sockets
}

// SpreadOptions are the ratio and spread of a preference's spread topology:
// spreadOptions, else preferSpreadSocketToCoreRatio and SocketsCores, else 2.
func SpreadOptions(pref *instancetypev1beta1.VirtualMachinePreferenceSpec) (uint32, instancetypev1beta1.SpreadAcross) {
	ratio, across := uint32(2), instancetypev1beta1.SpreadAcrossSocketsCores
	if pref == nil {
		return ratio, across
	}
	if pref.PreferSpreadSocketToCoreRatio != 0 {
		ratio = pref.PreferSpreadSocketToCoreRatio
	}
	if pref.CPU != nil && pref.CPU.SpreadOptions != nil {
		if pref.CPU.SpreadOptions.Across != nil {
			across = *pref.CPU.SpreadOptions.Across
		}
		if pref.CPU.SpreadOptions.Ratio != nil {
			ratio = *pref.CPU.SpreadOptions.Ratio
		}
	}
	return ratio, across
}

func applyMemory(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	domain := &t.Spec.Domain
	if domain.Memory == nil {
		domain.Memory = &v1.Memory{}
	}
	mem, itMem := domain.Memory, &it.Memory
	var c Conflicts
	const guest = "spec.memory.guest"
	if mem.Guest != nil {
		c = append(c, conflict(t.SpecPath, guest, "domain", "memory", "guest"))
	}
	if mem.Hugepages != nil && itMem.Hugepages != nil {
		c = append(c, conflict(t.SpecPath, "spec.memory.hugepages", "domain", "memory", "hugepages"))
	}
	if mem.MaxGuest != nil && itMem.MaxGuest != nil {
		c = append(c, conflict(t.SpecPath, "spec.memory.maxGuest", "domain", "memory", "maxGuest"))
	}
	if _, ok := domain.Resources.Requests[corev1.ResourceMemory]; ok {
		c = append(c, conflict(t.SpecPath, guest, "domain", "resources", "requests", string(corev1.ResourceMemory)))
	}
	if _, ok := domain.Resources.Limits[corev1.ResourceMemory]; ok {
		c = append(c, conflict(t.SpecPath, guest, "domain", "resources", "limits", string(corev1.ResourceMemory)))
	}
	if len(c) > 0 {
		return c
	}
	g := itMem.Guest.DeepCopy()
	mem.Guest = &g
	if pct := itMem.OvercommitPercent; pct > 0 {
		// The launcher pod requests that much less than the guest sees.
		if domain.Resources.Requests == nil {
			domain.Resources.Requests = corev1.ResourceList{}
		}
		req := int64(float32(g.Value()) * (1 - float32(pct)/100))
		domain.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(req, g.Format)
	}
	if itMem.Hugepages != nil {
		mem.Hugepages = itMem.Hugepages.DeepCopy()
	}
	if itMem.MaxGuest != nil {
		m := itMem.MaxGuest.DeepCopy()
		mem.MaxGuest = &m
	}
	return nil
}

func applyIOThreads(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	domain := &t.Spec.Domain
	var c Conflicts
	if it.IOThreadsPolicy != nil {
		if domain.IOThreadsPolicy != nil {
			c = append(c, conflict(t.SpecPath, "spec.ioThreadsPolicy", "domain", "ioThreadsPolicy"))
		} else {
			p := *it.IOThreadsPolicy
			domain.IOThreadsPolicy = &p
		}
	}
	if it.IOThreads != nil && it.IOThreads.SupplementalPoolThreadCount != nil {
		if domain.IOThreads != nil && domain.IOThreads.SupplementalPoolThreadCount != nil {
			c = append(c, conflict(t.SpecPath, "spec.ioThreads.supplementalPoolThreadCount", "domain", "ioThreads", "supplementalPoolThreadCount"))
		} else {
			if domain.IOThreads == nil {
				domain.IOThreads = &v1.DiskIOThreads{}
			}
			n := *it.IOThreads.SupplementalPoolThreadCount
			domain.IOThreads.SupplementalPoolThreadCount = &n
		}
	}
	return c
}

func applyLaunchSecurity(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	if it.LaunchSecurity == nil {
		return nil
	}
	if t.Spec.Domain.LaunchSecurity != nil {
		return Conflicts{conflict(t.SpecPath, "spec.launchSecurity", "domain", "launchSecurity")}
	}
	t.Spec.Domain.LaunchSecurity = it.LaunchSecurity.DeepCopy()
	return nil
}

func applyGPUs(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	if len(it.GPUs) == 0 {
		return nil
	}
	if len(t.Spec.Domain.Devices.GPUs) > 0 {
		return Conflicts{conflict(t.SpecPath, "spec.gpus", "domain", "devices", "gpus")}
	}
	for i := range it.GPUs {
		t.Spec.Domain.Devices.GPUs = append(t.Spec.Domain.Devices.GPUs, *it.GPUs[i].DeepCopy())
	}
	return nil
}

func applyHostDevices(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	if len(it.HostDevices) == 0 {
		return nil
	}
	if len(t.Spec.Domain.Devices.HostDevices) > 0 {
		return Conflicts{conflict(t.SpecPath, "spec.hostDevices", "domain", "devices", "hostDevices")}
	}
	for i := range it.HostDevices {
		t.Spec.Domain.Devices.HostDevices = append(t.Spec.Domain.Devices.HostDevices, *it.HostDevices[i].DeepCopy())
	}
	return nil
}

// applyAnnotations adds the instance type's annotations; one the target sets
// to another value is a conflict.
func applyAnnotations(t Target, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) Conflicts {
	if len(it.Annotations) == 0 || t.Meta == nil {
		return nil
	}
	if t.Meta.Annotations == nil {
		t.Meta.Annotations = map[string]string{}
	}
	var c Conflicts
	for _, k := range slices.Sorted(maps.Keys(it.Annotations)) {
		v := it.Annotations[k]
		if have, ok := t.Meta.Annotations[k]; ok {
			if have != v {
				c = append(c, Conflict{Field: t.MetaPath.Child("annotations").Key(k), Instancetype: field.NewPath("spec", "annotations").Key(k).String()})
			}
			continue
		}
		t.Meta.Annotations[k] = v
	}
	return c
}
