package vmi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/kvconfig"
)

// BackendStorageLabel marks a backend-storage claim with the name of the
// VMI (VM) whose persistent state it keeps (KubeVirt's
// persistent-state-for label).
const BackendStorageLabel = "persistent-state-for"

// ensureBackendStorage creates the backend-storage claim of a VMI with
// persistent state, unless it exists; nil for a VMI without.
func (c *Controller) ensureBackendStorage(ctx context.Context, key string, vmi *v1.VirtualMachineInstance) *syncError {
	if !v1.NeedsBackendStorage(&vmi.Spec) {
		return nil
	}
	name := v1.BackendStorageClaimName(vmi.Name)
	if c.claimLister != nil {
		if _, err := c.claimLister.PersistentVolumeClaims(vmi.Namespace).Get(name); err == nil {
			return nil
		}
	}
	if c.claimClient == nil {
		return &syncError{reason: ReasonFailedCreate, err: fmt.Errorf("VirtualMachineInstance %s has persistent state and this controller creates no backend-storage claims (vmi.Config.ClaimClient)", key)}
	}
	claim := backendStorageClaim(vmi, kvconfig.Of(c.kubevirts))
	_, err := c.claimClient.PersistentVolumeClaims(vmi.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.recorder.Eventf(vmi, corev1.EventTypeNormal, "SuccessfulCreate", "Created backend-storage claim %s for the VM's persistent state", name)
	case apierrors.IsAlreadyExists(err):
	default:
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating backend-storage claim %s: %v", name, err)
		return &syncError{reason: ReasonFailedCreate, err: fmt.Errorf("creating backend-storage claim %s/%s of VirtualMachineInstance %s: %w", vmi.Namespace, name, key, err)}
	}
	return nil
}

// backendStorageClaim is the claim that keeps vmi's persistent state:
// KubeVirt's name and size, the KubeVirt CR's vmStateStorageClass (nil: the
// cluster's default class), ReadWriteOnce in Filesystem mode (every
// provisioner offers it; the VMI then cannot live-migrate, as in KubeVirt
// with a ReadWriteOnce class). It belongs to the VMI's VM, so the state
// outlives each VMI and goes with the VM; a VMI without a VM owns it itself.
func backendStorageClaim(vmi *v1.VirtualMachineInstance, kv *v1.KubeVirt) *corev1.PersistentVolumeClaim {
	owner := metav1.GetControllerOf(vmi)
	if owner == nil || owner.Kind != "VirtualMachine" {
		owner = metav1.NewControllerRef(vmi, v1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))
	}
	fs := corev1.PersistentVolumeFilesystem
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            v1.BackendStorageClaimName(vmi.Name),
			Namespace:       vmi.Namespace,
			Labels:          map[string]string{BackendStorageLabel: vmi.Name},
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &fs,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(v1.BackendStorageClaimSize),
			}},
		},
	}
	if kv != nil && kv.Spec.Configuration.VMStateStorageClass != "" {
		class := kv.Spec.Configuration.VMStateStorageClass
		claim.Spec.StorageClassName = &class
	}
	return claim
}
