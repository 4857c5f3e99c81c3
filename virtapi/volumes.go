package virtapi

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Volume hotplug, KubeVirt's addvolume and removevolume subresources
// (virtctl addvolume/removevolume), with KubeVirt's DeclarativeHotplugVolumes
// behaviour: on a VM (virtctl --persist) the volume is added to or removed
// from the VM's template, and the VM controller carries the change to the
// running instance; on a VMI that no VM owns, it changes the VMI's spec
// (KubeVirt's ephemeral hotplug). The node agent then mounts the claim into
// the launcher and the launcher attaches the disk (nodeagent/volumes.go).

// addVolume serves PUT .../virtualmachines/{name}/addvolume (onVMI false)
// and .../virtualmachineinstances/{name}/addvolume.
func (s *Server) addVolume(onVMI bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var opts v1.AddVolumeOptions
		if !decodeBody(w, r, &opts) {
			return
		}
		if err := s.volumeRequest(r.Context(), r.PathValue("namespace"), r.PathValue("name"), onVMI, &v1.VirtualMachineVolumeRequest{AddVolumeOptions: &opts}); err != nil {
			writeStatus(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// removeVolume serves PUT .../removevolume on VMs and VMIs.
func (s *Server) removeVolume(onVMI bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var opts v1.RemoveVolumeOptions
		if !decodeBody(w, r, &opts) {
			return
		}
		if err := s.volumeRequest(r.Context(), r.PathValue("namespace"), r.PathValue("name"), onVMI, &v1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &opts}); err != nil {
			writeStatus(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// volumeRequest checks req and patches the VM's template or the VMI's spec
// with it, testing the volumes and disks it read.
func (s *Server) volumeRequest(ctx context.Context, ns, name string, onVMI bool, req *v1.VirtualMachineVolumeRequest) error {
	if err := checkVolumeRequest(req); err != nil {
		return err
	}
	var (
		spec     *v1.VirtualMachineInstanceSpec
		prefix   string
		resource = vmResource
	)
	if onVMI {
		resource = vmiResource
		vmi, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if owner := metav1.GetControllerOf(vmi); owner != nil && owner.Kind == "VirtualMachine" && owner.APIVersion == v1.SchemeGroupVersion.String() {
			// KubeVirt's answer without its HotplugVolumes gate: the
			// VM's template is what its instance follows (virtctl
			// --persist changes it).
			return apierrors.NewBadRequest(fmt.Sprintf("VMI %s/%s is owned by a VM", ns, name))
		}
		if vmi.Status.Phase != v1.Running {
			return conflict(vmiResource, name, msgVMINotRunning)
		}
		spec = &vmi.Spec
	} else {
		vm, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vm.Spec.Template == nil {
			return apierrors.NewBadRequest(fmt.Sprintf("VM %s/%s has no spec.template", ns, name))
		}
		spec, prefix = &vm.Spec.Template.Spec, "/spec/template"
	}
	if msg := verifyVolumeRequest(spec.Volumes, req); msg != "" {
		return conflict(resource, name, "%s", msg)
	}
	changed := spec.DeepCopy()
	v1.ApplyVolumeRequest(changed, req)
	volumes, disks := prefix+"/spec/volumes", prefix+"/spec/domain/devices/disks"
	ops := []jsonpatch.Op{jsonpatch.Test(volumes, spec.Volumes), jsonpatch.Test(disks, spec.Domain.Devices.Disks)}
	for _, set := range []struct {
		path     string
		was, now any
		empty    bool
	}{
		{volumes, spec.Volumes, changed.Volumes, len(changed.Volumes) == 0},
		{disks, spec.Domain.Devices.Disks, changed.Domain.Devices.Disks, len(changed.Domain.Devices.Disks) == 0},
	} {
		if set.empty {
			ops = append(ops, jsonpatch.Remove(set.path))
		} else {
			ops = append(ops, jsonpatch.Add(set.path, set.now))
		}
	}
	body, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	patch := metav1.PatchOptions{DryRun: requestDryRun(req)}
	if onVMI {
		_, err = s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(ns).Patch(ctx, name, types.JSONPatchType, body, patch)
	} else {
		_, err = s.cfg.Kubevirt.KubevirtV1().VirtualMachines(ns).Patch(ctx, name, types.JSONPatchType, body, patch)
	}
	if err != nil {
		if apierrors.IsInvalid(err) {
			return err // the webhook's refusal names the field
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return conflict(resource, name, "%v", err)
		}
		return apierrors.NewInternalError(err)
	}
	return nil
}

// checkVolumeRequest refuses a request missing what KubeVirt requires, with
// its messages, and a disk on a bus that cannot take a device while the
// guest runs.
func checkVolumeRequest(req *v1.VirtualMachineVolumeRequest) error {
	if add := req.AddVolumeOptions; add != nil {
		switch {
		case add.Name == "":
			return apierrors.NewBadRequest("AddVolumeOptions requires name to be set")
		case add.Disk == nil:
			return apierrors.NewBadRequest("AddVolumeOptions requires disk to not be nil")
		case add.VolumeSource == nil || add.VolumeSource.PersistentVolumeClaim == nil && add.VolumeSource.DataVolume == nil:
			return apierrors.NewBadRequest("AddVolumeOptions requires VolumeSource to not be nil")
		}
		var bus v1.DiskBus
		switch d := add.Disk; {
		case d.CDRom != nil:
			return apierrors.NewBadRequest(fmt.Sprintf("AddVolumeOptions: disk %s is a cdrom; a hotplugged volume is a disk or lun on bus scsi or virtio", add.Name))
		case d.LUN != nil:
			bus = d.LUN.Bus
		case d.Disk != nil:
			bus = d.Disk.Bus
		}
		if bus != "" && bus != v1.DiskBusSCSI && bus != v1.DiskBusVirtio {
			return apierrors.NewBadRequest(fmt.Sprintf("AddVolumeOptions: disk %s is on bus %q; a hotplugged volume is on bus scsi or virtio", add.Name, bus))
		}
		return nil
	}
	if rm := req.RemoveVolumeOptions; rm != nil && rm.Name != "" {
		return nil
	}
	return apierrors.NewBadRequest("RemoveVolumeOptions requires name to be set")
}

// verifyVolumeRequest checks req against the volumes it changes and
// says what is wrong, with KubeVirt's messages: a name or claim added
// twice, a volume removed that is not there or was not hotplugged.
func verifyVolumeRequest(volumes []v1.Volume, req *v1.VirtualMachineVolumeRequest) string {
	if add := req.AddVolumeOptions; add != nil {
		source := add.VolumeSource.ClaimName()
		for _, vol := range volumes {
			if vol.Name == add.Name {
				return fmt.Sprintf("Unable to add volume [%s] because volume with that name already exists", add.Name)
			}
			if source != "" && volumeSource(&vol) == source {
				return fmt.Sprintf("Unable to add volume source [%s] because it already exists", source)
			}
		}
		return ""
	}
	name := req.RemoveVolumeOptions.Name
	for _, vol := range volumes {
		if vol.Name == name || volumeSource(&vol) == name {
			if !v1.IsHotpluggable(&vol) {
				return fmt.Sprintf("Unable to remove volume [%s] because it is not hotpluggable", vol.Name)
			}
			return ""
		}
	}
	return fmt.Sprintf("Unable to remove volume [%s] because it does not exist", name)
}

// volumeSource is the claim or DataVolume behind a volume, or "".
func volumeSource(vol *v1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.DataVolume != nil:
		return vol.DataVolume.Name
	}
	return ""
}

// requestDryRun is the request's dryRun when it is "All".
func requestDryRun(req *v1.VirtualMachineVolumeRequest) []string {
	var d []string
	if req.AddVolumeOptions != nil {
		d = req.AddVolumeOptions.DryRun
	} else if req.RemoveVolumeOptions != nil {
		d = req.RemoveVolumeOptions.DryRun
	}
	if dryRunAll(d) {
		return d
	}
	return nil
}
