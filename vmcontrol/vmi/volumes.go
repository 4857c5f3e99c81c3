package vmi

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// DefaultFilesystemOverhead is the share of a Filesystem claim the VMI
// controller reports as not usable by a disk image
// (status.volumeStatus[].persistentVolumeClaimInfo.filesystemOverhead):
// KubeVirt's default without CDI, and CDI's default (5.5%). A Block claim's
// overhead is "0".
const DefaultFilesystemOverhead = "0.055"

// volumeClaim is the name of the claim behind a persistentVolumeClaim or
// dataVolume volume (a DataVolume's claim has its name), or "".
func volumeClaim(vol *v1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.DataVolume != nil:
		return vol.DataVolume.Name
	case vol.MemoryDump != nil:
		return vol.MemoryDump.ClaimName
	}
	return ""
}

// claimsOf reads the claims of the VMI's claim volumes from the lister,
// by claim name; claims missing from the cache are left out.
func (c *Controller) claimsOf(vmi *v1.VirtualMachineInstance) map[string]*corev1.PersistentVolumeClaim {
	if c.claimLister == nil {
		return nil
	}
	var claims map[string]*corev1.PersistentVolumeClaim
	for i := range vmi.Spec.Volumes {
		name := volumeClaim(&vmi.Spec.Volumes[i])
		if name == "" {
			continue
		}
		pvc, err := c.claimLister.PersistentVolumeClaims(vmi.Namespace).Get(name)
		if err != nil {
			continue
		}
		if claims == nil {
			claims = map[string]*corev1.PersistentVolumeClaim{}
		}
		claims[name] = pvc
	}
	return claims
}

// volumeStatus is status.volumeStatus as KubeVirt's VMI controller keeps
// it once the launcher pod is handed over: one entry per volume of the
// spec, in its order, keeping what others filled in (target, size...), and
// for a claim volume whose claim is known, persistentVolumeClaimInfo read
// from the claim (the node's launcher sizes the disk.img it creates in an
// empty Filesystem claim from it). A hotpluggable volume's entry has a
// hotplugVolume (no attachment pod: the node agent mounts the claim
// itself) and, until the node agent takes it further, the phase Pending or
// Bound of its claim. Entries of volumes no longer in the spec are dropped,
// but for hotplugged volumes the guest may still have: the node agent
// drops those once it has unplugged them (Detaching).
func volumeStatus(volumes []v1.Volume, old []v1.VolumeStatus, claims map[string]*corev1.PersistentVolumeClaim) []v1.VolumeStatus {
	prev := make(map[string]*v1.VolumeStatus, len(old))
	for i := range old {
		prev[old[i].Name] = &old[i]
	}
	out := make([]v1.VolumeStatus, 0, len(volumes))
	inSpec := make(map[string]bool, len(volumes))
	for i := range volumes {
		vol := &volumes[i]
		inSpec[vol.Name] = true
		st := v1.VolumeStatus{Name: vol.Name}
		if p, ok := prev[vol.Name]; ok {
			st = *p.DeepCopy()
		}
		pvc, ok := claims[volumeClaim(vol)]
		if ok {
			st.PersistentVolumeClaimInfo = claimInfo(pvc)
		}
		if v1.HotplugClaim(vol) != "" {
			if st.HotplugVolume == nil {
				st.HotplugVolume = &v1.HotplugVolumeStatus{}
			}
			if st.Phase == "" || st.Phase == v1.VolumePending || st.Phase == v1.VolumeBound || st.Phase == v1.HotplugVolumeDetaching {
				st.Phase = v1.VolumePending
				if ok && pvc.Status.Phase == corev1.ClaimBound {
					st.Phase = v1.VolumeBound
				}
			}
		}
		out = append(out, st)
	}
	for i := range old {
		st := &old[i]
		if inSpec[st.Name] || st.HotplugVolume == nil {
			continue
		}
		switch st.Phase {
		case v1.HotplugVolumeMounted, v1.VolumeReady, v1.HotplugVolumeDetaching,
			v1.MemoryDumpVolumeInProgress, v1.MemoryDumpVolumeCompleted, v1.MemoryDumpVolumeFailed:
			out = append(out, *st.DeepCopy())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// claimInfo is what KubeVirt's VMI controller reports of a claim: its
// name, access modes, volume mode, the bound volume's capacity
// (status.capacity), the requests, whether CDI preallocated it and the
// file-system overhead.
func claimInfo(pvc *corev1.PersistentVolumeClaim) *v1.PersistentVolumeClaimInfo {
	overhead := DefaultFilesystemOverhead
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		overhead = "0"
	}
	info := &v1.PersistentVolumeClaimInfo{
		ClaimName:          pvc.Name,
		AccessModes:        pvc.Spec.AccessModes,
		VolumeMode:         pvc.Spec.VolumeMode,
		Capacity:           pvc.Status.Capacity,
		Requests:           pvc.Spec.Resources.Requests,
		Preallocated:       preallocated(pvc.Annotations),
		FilesystemOverhead: &overhead,
	}
	return info.DeepCopy()
}

// preallocated: an annotation <prefix>/storage.preallocation or
// <prefix>/storage.thick-provisioned is "true" (CDI's, as KubeVirt reads them).
func preallocated(annotations map[string]string) bool {
	for k, v := range annotations {
		if v == "true" && (strings.HasSuffix(k, "/storage.preallocation") || strings.HasSuffix(k, "/storage.thick-provisioned")) {
			return true
		}
	}
	return false
}
