package virtapi

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// expandSpec answers the VM as its instances are built: the instance type
// and preference it names applied to its template (the revisions the VM
// controller pinned in status.instancetypeRef/preferenceRef when there are
// any, else the current objects) and the matchers removed, as KubeVirt's
// expand-spec does. A template that conflicts with its instance type is a
// 400 naming both fields.
func (s *Server) expandSpec(w http.ResponseWriter, r *http.Request) {
	vm, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachines(r.PathValue("namespace")).Get(r.Context(), r.PathValue("name"), metav1.GetOptions{})
	if err != nil {
		writeStatus(w, err)
		return
	}
	if err := s.expand(r.Context(), vm); err != nil {
		writeStatus(w, err)
		return
	}
	vm.TypeMeta = metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine"}
	writeJSON(w, http.StatusOK, vm)
}

func (s *Server) expand(ctx context.Context, vm *v1.VirtualMachine) error {
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return nil
	}
	target := instancetype.VMTemplate(vm)
	if target == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("VirtualMachine %s/%s has no spec.template to expand", vm.Namespace, vm.Name))
	}
	var (
		it   *instancetypev1beta1.VirtualMachineInstancetypeSpec
		pref *instancetypev1beta1.VirtualMachinePreferenceSpec
	)
	if m := vm.Spec.Instancetype; m != nil {
		obj, err := s.instancetypeObject(ctx, vm, m.Name, m.Kind, m.RevisionName, vm.Status.InstancetypeRef, true)
		if err != nil {
			return err
		}
		if it, err = instancetype.InstancetypeSpec(obj); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	if m := vm.Spec.Preference; m != nil {
		obj, err := s.instancetypeObject(ctx, vm, m.Name, m.Kind, m.RevisionName, vm.Status.PreferenceRef, false)
		if err != nil {
			return err
		}
		if pref, err = instancetype.PreferenceSpec(obj); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	if conflicts := instancetype.Apply(*target, it, pref); len(conflicts) > 0 {
		return apierrors.NewBadRequest(conflicts.Error())
	}
	vm.Spec.Instancetype, vm.Spec.Preference = nil, nil
	return nil
}

// instancetypeObject finds what a matcher names: the ControllerRevision it
// or the VM's status pins, else the current instance type or preference.
func (s *Server) instancetypeObject(ctx context.Context, vm *v1.VirtualMachine, name, kind, revision string, ref *v1.InstancetypeStatusRef, isType bool) (instancetype.Object, error) {
	what := "spec.preference"
	if isType {
		what = "spec.instancetype"
	}
	if revision == "" && ref != nil && ref.Name == name && ref.ControllerRevisionRef != nil {
		revision = ref.ControllerRevisionRef.Name
	}
	if revision != "" {
		rev, err := s.cfg.Kube.AppsV1().ControllerRevisions(vm.Namespace).Get(ctx, revision, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		obj, err := instancetype.FromRevision(rev)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return obj, nil
	}
	it := s.cfg.Kubevirt.InstancetypeV1beta1()
	if isType {
		k, err := instancetype.InstancetypeKind(kind)
		if err != nil {
			return nil, apierrors.NewBadRequest(what + ".kind: " + err.Error())
		}
		if k == instancetype.KindInstancetype {
			return it.VirtualMachineInstancetypes(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
		}
		return it.VirtualMachineClusterInstancetypes().Get(ctx, name, metav1.GetOptions{})
	}
	k, err := instancetype.PreferenceKind(kind)
	if err != nil {
		return nil, apierrors.NewBadRequest(what + ".kind: " + err.Error())
	}
	if k == instancetype.KindPreference {
		return it.VirtualMachinePreferences(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return it.VirtualMachineClusterPreferences().Get(ctx, name, metav1.GetOptions{})
}
