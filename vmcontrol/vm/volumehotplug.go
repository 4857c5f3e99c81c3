package vm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Declarative volume hotplug (KubeVirt's DeclarativeHotplugVolumes, which
// virt-api's addvolume/removevolume on a VM also use): a hotpluggable
// claim volume added to a running VM's template, with its disk, is given
// to the running instance, and one removed is taken from it, without a
// restart; the node agent attaches and detaches the disk. Other volume
// changes still wait for a restart.

// ReasonVolumesHotplugged is the reason of the event the controller records
// when it gives the running instance the template's hotpluggable volumes.
const ReasonVolumesHotplugged = "SuccessfulVolumeHotplug"

// withoutHotplugVolumes is spec without its hotpluggable volumes and their
// disks: what a restart is judged on.
func withoutHotplugVolumes(spec *v1.VirtualMachineInstanceSpec) {
	var gone []string
	spec.Volumes = slices.DeleteFunc(slices.Clone(spec.Volumes), func(vol v1.Volume) bool {
		if v1.IsHotpluggable(&vol) {
			gone = append(gone, vol.Name)
			return true
		}
		return false
	})
	spec.Domain.Devices.Disks = slices.DeleteFunc(slices.Clone(spec.Domain.Devices.Disks), func(d v1.Disk) bool { return slices.Contains(gone, d.Name) })
}

// hotplugVolumes gives the running instance the hotpluggable volumes (and
// disks) of vm's template it lacks and takes away the hotpluggable ones
// the template no longer has, in one JSON patch that tests the volumes and
// disks it replaces.
func (c *Controller) hotplugVolumes(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.Status.Phase != v1.Running || vm.Spec.Template == nil ||
		vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed {
		return nil
	}
	tmpl, cur := &vm.Spec.Template.Spec, &vmi.Spec
	has := func(vols []v1.Volume, name string) bool {
		return slices.ContainsFunc(vols, func(v v1.Volume) bool { return v.Name == name })
	}
	diskOf := func(disks []v1.Disk, name string) (v1.Disk, bool) {
		i := slices.IndexFunc(disks, func(d v1.Disk) bool { return d.Name == name })
		if i < 0 {
			return v1.Disk{}, false
		}
		return disks[i], true
	}
	var added, removed []string
	vols := slices.DeleteFunc(slices.Clone(cur.Volumes), func(vol v1.Volume) bool {
		if v1.IsHotpluggable(&vol) && !has(tmpl.Volumes, vol.Name) {
			removed = append(removed, vol.Name)
			return true
		}
		return false
	})
	disks := slices.DeleteFunc(slices.Clone(cur.Domain.Devices.Disks), func(d v1.Disk) bool { return slices.Contains(removed, d.Name) })
	for _, vol := range tmpl.Volumes {
		if !v1.IsHotpluggable(&vol) || has(cur.Volumes, vol.Name) {
			continue
		}
		d, ok := diskOf(tmpl.Domain.Devices.Disks, vol.Name)
		if !ok {
			continue // a volume without a disk is nothing the guest sees
		}
		vols, disks = append(vols, vol), append(disks, d)
		added = append(added, vol.Name)
	}
	if len(added) == 0 && len(removed) == 0 {
		return nil
	}
	ops := []jsonpatch.Op{
		jsonpatch.Test("/spec/volumes", cur.Volumes),
		jsonpatch.Test("/spec/domain/devices/disks", cur.Domain.Devices.Disks),
	}
	for _, set := range []struct {
		path string
		now  any
		n    int
	}{{"/spec/volumes", vols, len(vols)}, {"/spec/domain/devices/disks", disks, len(disks)}} {
		if set.n == 0 {
			ops = append(ops, jsonpatch.Remove(set.path))
		} else {
			ops = append(ops, jsonpatch.Add(set.path, set.now))
		}
	}
	patch, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return err
	}
	if _, err := c.client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("hot-plugging volumes of VirtualMachineInstance %s/%s (adding [%s], removing [%s]): %w",
			vmi.Namespace, vmi.Name, strings.Join(added, " "), strings.Join(removed, " "), err)
	}
	c.recorder.Eventf(vm, corev1.EventTypeNormal, ReasonVolumesHotplugged, "Volumes of the running instance: added [%s], removed [%s]", strings.Join(added, " "), strings.Join(removed, " "))
	return nil
}
