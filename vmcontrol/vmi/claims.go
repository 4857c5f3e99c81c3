package vmi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/cdi"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// ReasonFailedPvcNotFound is the reason of the Synchronized=False condition
// and of the event while a claim the VMI needs does not exist (KubeVirt's
// FailedPvcNotFound).
const ReasonFailedPvcNotFound = "FailedPvcNotFound"

// Reasons of the Synchronized=False condition while a dataVolume volume's
// DataVolume is not usable: CDI is still populating it, or failed.
const (
	ReasonDataVolumeNotReady = "DataVolumeNotReady"
	ReasonDataVolumeError    = "DataVolumeError"
)

// claimIndex indexes VMIs by the claims they need at start, as "namespace/name".
const claimIndex = "vmcontrol/vmi.claims"

// claimRef is a claim a VMI volume needs before its launcher pod can run.
type claimRef struct {
	volume int    // index in spec.volumes
	name   string // volume name
	claim  string
}

// neededClaims lists the claims the launcher pod mounts: persistentVolumeClaim
// and dataVolume volumes (a DataVolume's claim has its name) and the base of
// ephemeral volumes. Hotpluggable volumes are attached later by the node agent
// and do not hold the pod back.
func neededClaims(spec *v1.VirtualMachineInstanceSpec) []claimRef {
	var refs []claimRef
	for i, vol := range spec.Volumes {
		src := &vol.VolumeSource
		switch {
		case src.PersistentVolumeClaim != nil && !src.PersistentVolumeClaim.Hotpluggable && src.PersistentVolumeClaim.ClaimName != "":
			refs = append(refs, claimRef{i, vol.Name, src.PersistentVolumeClaim.ClaimName})
		case src.DataVolume != nil && !src.DataVolume.Hotpluggable && src.DataVolume.Name != "":
			refs = append(refs, claimRef{i, vol.Name, src.DataVolume.Name})
		case src.Ephemeral != nil && src.Ephemeral.PersistentVolumeClaim != nil && src.Ephemeral.PersistentVolumeClaim.ClaimName != "":
			refs = append(refs, claimRef{i, vol.Name, src.Ephemeral.PersistentVolumeClaim.ClaimName})
		}
	}
	return refs
}

// indexByClaim is the VMI informer's index func for claimIndex: the
// claims the VMI waits for, and its hotplugged claims.
func indexByClaim(obj any) ([]string, error) {
	vmi, ok := obj.(*v1.VirtualMachineInstance)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, ref := range neededClaims(&vmi.Spec) {
		keys = append(keys, vmi.Namespace+"/"+ref.claim)
	}
	// Hotplugged claims too: their binding moves the volume's phase on.
	for i := range vmi.Spec.Volumes {
		if claim := v1.HotplugClaim(&vmi.Spec.Volumes[i]); claim != "" {
			keys = append(keys, vmi.Namespace+"/"+claim)
		}
	}
	return keys, nil
}

// enqueueClaimUsers enqueues the VMIs that need the claim (or DataVolume)
// obj, so a VMI waiting for it creates its pod as soon as it is there.
func (c *Controller) enqueueClaimUsers(obj any) {
	o, ok := reconcile.Unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	users, err := c.vmiIndexer.ByIndex(claimIndex, o.GetNamespace()+"/"+o.GetName())
	if err != nil {
		return
	}
	for _, u := range users {
		if key, err := cache.MetaNamespaceKeyFunc(u); err == nil {
			c.loop.Queue.Add(key)
		}
	}
}

// missingClaim reports the first claim the VMI needs that does not exist, as
// a FailedPvcNotFound sync error, or nil when all exist (or no claim lister
// was configured). A claim being deleted still exists, and a claim still
// Pending (for instance waiting for its first consumer) does not hold the pod
// back: both as KubeVirt.
func (c *Controller) missingClaim(vmi *v1.VirtualMachineInstance) *syncError {
	if c.claimLister == nil {
		return nil
	}
	for _, ref := range neededClaims(&vmi.Spec) {
		if vmi.Spec.Volumes[ref.volume].DataVolume != nil {
			if waiting := c.dataVolumeNotReady(vmi, ref); waiting != nil {
				return waiting
			}
		}
		_, err := c.claimLister.PersistentVolumeClaims(vmi.Namespace).Get(ref.claim)
		switch {
		case apierrors.IsNotFound(err):
			return &syncError{reason: ReasonFailedPvcNotFound,
				err: fmt.Errorf("spec.volumes[%d] %q: PersistentVolumeClaim %s/%s not found", ref.volume, ref.name, vmi.Namespace, ref.claim)}
		case err != nil:
			return &syncError{reason: ReasonFailedCreate, err: fmt.Errorf("looking up PersistentVolumeClaim %s/%s: %w", vmi.Namespace, ref.claim, err)}
		}
	}
	return nil
}

// dataVolumeNotReady reports a dataVolume volume whose DataVolume CDI has not
// made usable yet, or nil (also when DataVolumes are not watched, or CDI
// removed the DataVolume after it succeeded: then the claim decides).
func (c *Controller) dataVolumeNotReady(vmi *v1.VirtualMachineInstance, ref claimRef) *syncError {
	if c.dataVolumes == nil {
		return nil
	}
	obj, exists, err := c.dataVolumes.GetByKey(vmi.Namespace + "/" + ref.claim)
	if err != nil || !exists {
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	phase := cdi.Phase(u)
	switch {
	case cdi.Usable(phase):
		return nil
	case phase == cdi.PhaseFailed:
		return &syncError{reason: ReasonDataVolumeError,
			err: fmt.Errorf("spec.volumes[%d] %q: DataVolume %s/%s failed", ref.volume, ref.name, vmi.Namespace, ref.claim)}
	}
	if phase == "" {
		phase = "not populated yet"
	}
	return &syncError{reason: ReasonDataVolumeNotReady,
		err: fmt.Errorf("spec.volumes[%d] %q: DataVolume %s/%s is %s", ref.volume, ref.name, vmi.Namespace, ref.claim, phase)}
}

// ClaimVolumeMode returns a lookup of a claim's volume mode from a claim
// lister, for podtemplate.Config.ClaimVolumeMode: Block claims are then
// attached to the launcher pod as devices. A claim without a mode is a
// Filesystem claim; a missing claim is an error (the VMI controller does not
// render pods of VMIs whose claims are missing, when given the same lister).
func ClaimVolumeMode(claims corelisters.PersistentVolumeClaimLister) func(namespace, claimName string) (corev1.PersistentVolumeMode, error) {
	return func(namespace, claimName string) (corev1.PersistentVolumeMode, error) {
		pvc, err := claims.PersistentVolumeClaims(namespace).Get(claimName)
		if err != nil {
			return "", err
		}
		if pvc.Spec.VolumeMode == nil {
			return corev1.PersistentVolumeFilesystem, nil
		}
		return *pvc.Spec.VolumeMode, nil
	}
}
