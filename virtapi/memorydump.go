package virtapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's memory dump subresources (virtctl memory-dump get/remove):
// they record the request in the VM's status.memoryDumpRequest, which the
// VM controller carries out (vmcontrol/vm/memorydump.go).

// memoryDumpOverhead is what KubeVirt adds to the guest's memory for the
// dump's size (the ELF headers and notes), and fsOverhead the share of a
// Filesystem claim it keeps free (CDI's default, as without CDI).
const (
	memoryDumpOverhead = 100 << 20
	fsOverhead         = 0.055
)

var claimResource = schema.GroupResource{Resource: "persistentvolumeclaim"}

// memoryDump serves PUT .../virtualmachines/{name}/memorydump.
func (s *Server) memoryDump(w http.ResponseWriter, r *http.Request) {
	var req v1.VirtualMachineMemoryDumpRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := s.memoryDumpRequest(r.Context(), r.PathValue("namespace"), r.PathValue("name"), &req, false); err != nil {
		writeStatus(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// removeMemoryDump serves PUT .../virtualmachines/{name}/removememorydump.
func (s *Server) removeMemoryDump(w http.ResponseWriter, r *http.Request) {
	req := v1.VirtualMachineMemoryDumpRequest{Phase: v1.MemoryDumpDissociating, Remove: true}
	if err := s.memoryDumpRequest(r.Context(), r.PathValue("namespace"), r.PathValue("name"), &req, true); err != nil {
		writeStatus(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// memoryDumpRequest checks req as KubeVirt does and writes it to the VM's
// status, testing the request it replaces.
func (s *Server) memoryDumpRequest(ctx context.Context, ns, name string, req *v1.VirtualMachineMemoryDumpRequest, remove bool) error {
	vm, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	old := vm.Status.MemoryDumpRequest
	if remove {
		switch {
		case old == nil:
			return conflict(vmResource, name, "%s", fmt.Sprintf("can't remove memory dump association for vm %s, no association found", name))
		case old.Remove:
			return conflict(vmResource, name, "%s", fmt.Sprintf("memory dump remove request for pvc [%s] already exists", old.ClaimName))
		}
		req.ClaimName = old.ClaimName
	} else {
		req.Phase, req.Remove = v1.MemoryDumpAssociating, false
		switch {
		case req.ClaimName == "" && old == nil:
			return apierrors.NewBadRequest("Memory dump requires claim name to be set")
		case req.ClaimName == "":
			req.ClaimName = old.ClaimName
		case old != nil && old.ClaimName != req.ClaimName:
			return conflict(vmResource, name, "%s", fmt.Sprintf("can't request memory dump for pvc [%s] while pvc [%s] is still associated as the memory dump pvc", req.ClaimName, old.ClaimName))
		}
		if old != nil && old.Phase == v1.MemoryDumpDissociating {
			return conflict(vmResource, name, "%s", fmt.Sprintf("can't dump memory for pvc [%s] a remove memory dump request is in progress", req.ClaimName))
		}
		if old != nil && old.Phase != v1.MemoryDumpCompleted && old.Phase != v1.MemoryDumpFailed {
			return conflict(vmResource, name, "%s", fmt.Sprintf("memory dump request for pvc [%s] already in progress", req.ClaimName))
		}
		vmi, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return conflict(vmiResource, name, msgVMINotRunning)
		}
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if vmi.Status.Phase != v1.Running {
			return conflict(vmiResource, name, msgVMINotRunning)
		}
		if err := s.checkDumpClaim(ctx, vmi, req.ClaimName); err != nil {
			return err
		}
	}
	ops := []jsonpatch.Op{jsonpatch.Test("/status/memoryDumpRequest", old)}
	if old == nil {
		ops = append(ops, jsonpatch.Add("/status/memoryDumpRequest", req))
	} else {
		ops = append(ops, jsonpatch.Replace("/status/memoryDumpRequest", req))
	}
	return s.patchVM(ctx, vm, true, ops, nil)
}

// checkDumpClaim refuses, with KubeVirt's messages, a claim that is not
// there, is a Block claim or read-only, or is too small for the guest's
// memory with KubeVirt's overheads.
func (s *Server) checkDumpClaim(ctx context.Context, vmi *v1.VirtualMachineInstance, claim string) error {
	pvc, err := s.cfg.Kube.CoreV1().PersistentVolumeClaims(vmi.Namespace).Get(ctx, claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(claimResource, claim)
	}
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("unable to retrieve pvc [%s]: %v", claim, err))
	}
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return conflict(claimResource, claim, "pvc should be filesystem pvc")
	}
	if slices.Contains(pvc.Spec.AccessModes, corev1.ReadOnlyMany) {
		return conflict(claimResource, claim, "pvc access mode can't be read only")
	}
	memory := vmi.Spec.Domain.Resources.Requests.Memory().Value()
	if g := vmi.Spec.Domain.Memory; g != nil && g.Guest != nil {
		memory = g.Guest.Value()
	}
	need := resource.NewQuantity(int64(math.Ceil(float64(memory+memoryDumpOverhead)/(1-fsOverhead))), resource.BinarySI)
	size := pvc.Spec.Resources.Requests.Storage()
	if size.Cmp(*need) < 0 {
		return conflict(claimResource, claim, "%s", fmt.Sprintf("pvc size [%s] should be bigger then [%s]", size, need))
	}
	return nil
}
