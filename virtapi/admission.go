package virtapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/podtemplate"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Paths of virt-api's validating admission webhooks (KubeVirt's), which
// kube-apiserver calls directly, not through the aggregation layer.
const (
	ValidateVMIPath        = "/virtualmachineinstances-validate-create"
	ValidateVMPath         = "/virtualmachines-validate"
	ValidateReplicaSetPath = "/virtualmachinereplicaset-validate"
)

// AdmissionConfig is the cluster configuration admission checks against.
type AdmissionConfig struct {
	// Emulation validates for QEMU's TCG emulator (the KubeVirt CR's
	// useEmulation).
	Emulation bool
	// FeatureGates are the KubeVirt CR's enabled feature gates; a hostDisk
	// volume needs HostDisk, a persistent TPM or EFI store VMPersistentState.
	FeatureGates []string
	// Expand, if set, applies a VM's instance type and preference to its
	// template (Server.Serve sets it), so a VM sized by an instance type is
	// validated as its instances will be. Without it such a VM's template
	// is not checked here (the VM controller reports what is wrong).
	Expand func(ctx context.Context, vm *v1.VirtualMachine) error
}

// AdmissionHandler serves the validating admission webhooks: a
// VirtualMachineInstance (on create), a VirtualMachine's and a
// VirtualMachineInstanceReplicaSet's template (on create and update) must
// be something a node can run (domainxml.Validate) and use only what the
// cluster's feature gates allow: the API server refuses it otherwise, with
// the object and every field error in the message. What KubeVirt's webhook
// admits is admitted, with one warning naming the object and the field:
// fields vmkit cannot honour yet (domainxml.Unsupported: a GPU, a TPM,
// SR-IOV...), and more vCPUs than vmkit runs (domainxml.ValidateAdmission:
// the launcher pod stays unscheduled, ErrorUnschedulable, as on KubeVirt).
// docs/api-compatibility.md lists what vmkit refuses and KubeVirt admits.
func AdmissionHandler(cfg AdmissionConfig) http.Handler {
	check := func(vmi *v1.VirtualMachineInstance) findings {
		errs, warns := domainxml.ValidateAdmission(vmi, cfg.Emulation)
		return findings{errs: append(gated(vmi, cfg.FeatureGates), errs...), warnings: warns}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ValidateVMIPath, admit(func(ctx context.Context, raw, oldRaw []byte) (findings, error) {
		vmi := &v1.VirtualMachineInstance{}
		if err := json.Unmarshal(raw, vmi); err != nil {
			return findings{}, err
		}
		// Validated with its defaults, as the VMI controller will run it
		// and as KubeVirt's mutating webhook defaults it before its
		// validating webhook sees it: a memory limit alone is also the
		// request, a disk without a device a virtio disk, ...
		v1.SetDefaults_VirtualMachineInstance(vmi)
		return check(vmi), nil
	}))
	mux.HandleFunc("POST "+ValidateVMPath, admit(func(ctx context.Context, raw, oldRaw []byte) (findings, error) {
		vm := &v1.VirtualMachine{}
		if err := json.Unmarshal(raw, vm); err != nil {
			return findings{}, err
		}
		if vm.Spec.Instancetype != nil || vm.Spec.Preference != nil {
			if cfg.Expand == nil {
				return findings{}, nil
			}
			switch err := cfg.Expand(ctx, vm); {
			case apierrors.IsNotFound(err):
				// Not there yet: the VM controller waits for it and
				// reports it on the VM.
				return findings{}, nil
			case apierrors.IsBadRequest(err):
				// A conflict between the template and the instance type,
				// refused as KubeVirt's webhook refuses it.
				return findings{errs: field.ErrorList{field.Invalid(field.NewPath("spec", "instancetype"), field.OmitValueType{}, err.Error())}}, nil
			case err != nil:
				return findings{}, err
			}
		}
		if errs := v1.ValidateVirtualMachine(vm); len(errs) > 0 {
			return findings{errs: errs}, nil
		}
		if len(oldRaw) > 0 {
			old := &v1.VirtualMachine{}
			if err := json.Unmarshal(oldRaw, old); err != nil {
				return findings{}, err
			}
			if errs := snapshotLocks(old, vm); len(errs) > 0 {
				return findings{errs: errs}, nil
			}
		}
		return validateTemplate(vm.ObjectMeta, vm.Spec.Template, check), nil
	}))
	mux.HandleFunc("POST "+ValidateReplicaSetPath, admit(func(ctx context.Context, raw, oldRaw []byte) (findings, error) {
		rs := &v1.VirtualMachineInstanceReplicaSet{}
		if err := json.Unmarshal(raw, rs); err != nil {
			return findings{}, err
		}
		if errs := v1.ValidateVirtualMachineInstanceReplicaSet(rs); len(errs) > 0 {
			return findings{errs: errs}, nil
		}
		return validateTemplate(rs.ObjectMeta, rs.Spec.Template, check), nil
	}))
	return mux
}

// snapshotLocks are KubeVirt's refusals of VM changes while a snapshot or
// a restore of the VM runs (its status.snapshotInProgress,
// status.restoreInProgress): the volumes and the run state stay as the
// snapshot or restore found them.
func snapshotLocks(old, vm *v1.VirtualMachine) field.ErrorList {
	var errs field.ErrorList
	runState := func(m *v1.VirtualMachine) (any, any) { return m.Spec.Running, m.Spec.RunStrategy }
	oldRunning, oldStrategy := runState(old)
	newRunning, newStrategy := runState(vm)
	runChanged := !equality.Semantic.DeepEqual(oldRunning, newRunning) || !equality.Semantic.DeepEqual(oldStrategy, newStrategy)
	if name := vm.Status.SnapshotInProgress; name != nil {
		var oldVolumes, newVolumes []v1.Volume
		if old.Spec.Template != nil {
			oldVolumes = old.Spec.Template.Spec.Volumes
		}
		if vm.Spec.Template != nil {
			newVolumes = vm.Spec.Template.Spec.Volumes
		}
		if !equality.Semantic.DeepEqual(oldVolumes, newVolumes) {
			errs = append(errs, field.Invalid(field.NewPath("spec"), field.OmitValueType{}, fmt.Sprintf("Cannot update vm disks or volumes until snapshot %q completes", *name)))
		}
		if runChanged {
			errs = append(errs, field.Invalid(field.NewPath("spec"), field.OmitValueType{}, fmt.Sprintf("Cannot update vm running state until snapshot %q completes", *name)))
		}
	}
	if name := vm.Status.RestoreInProgress; name != nil && runChanged {
		errs = append(errs, field.Invalid(field.NewPath("spec"), field.OmitValueType{}, fmt.Sprintf("Cannot update VM runStrategy until restore %q completes", *name)))
	}
	return errs
}

// findings are what admission found in an object: errs refuse it, unless
// each is a field vmkit cannot honour yet (domainxml.OnlyUnsupported), and
// warnings are problems KubeVirt's webhook admits, told with the admitted
// object.
type findings struct {
	errs, warnings field.ErrorList
}

// validateTemplate validates the instance a template starts, with the
// fields named as in the owner ("spec.template.spec.domain...").
func validateTemplate(owner metav1.ObjectMeta, tmpl *v1.VirtualMachineInstanceTemplateSpec, check func(*v1.VirtualMachineInstance) findings) findings {
	if tmpl == nil {
		return findings{} // v1 validation reported it
	}
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: owner.Name, GenerateName: owner.GenerateName, Namespace: owner.Namespace, Labels: tmpl.ObjectMeta.Labels},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	v1.SetDefaults_VirtualMachineInstance(vmi)
	found := check(vmi)
	for _, list := range []field.ErrorList{found.errs, found.warnings} {
		for _, e := range list {
			if rest, ok := strings.CutPrefix(e.Field, "spec."); ok {
				e.Field = "spec.template.spec." + rest
			} else if strings.HasPrefix(e.Field, "metadata.") {
				e.Field = "spec.template." + e.Field
			}
		}
	}
	// The controllers leave these out of the VMIs they create (only the
	// components may set them on a VMI): say so rather than drop them
	// unseen.
	for _, k := range v1.ReservedVMILabels() {
		if _, ok := tmpl.ObjectMeta.Labels[k]; ok {
			found.errs = append(found.errs, field.Forbidden(field.NewPath("spec", "template", "metadata", "labels").Key(k), "reserved to KubeVirt's components: a VirtualMachineInstance gets it from them, not from its template"))
		}
	}
	return found
}

// admit decodes an AdmissionReview, validates its object and answers.
func admit(validate func(ctx context.Context, raw, oldRaw []byte) (findings, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("not an admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		req := review.Request
		if op := req.Operation; op == admissionv1.Create || op == admissionv1.Update && specChanged(req.OldObject.Raw, req.Object.Raw) {
			found, err := validate(r.Context(), req.Object.Raw, req.OldObject.Raw)
			object := objectRef(req)
			switch {
			case err != nil:
				resp.Allowed = false
				resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
					Message: fmt.Sprintf("decoding %s: %v", object, err)}
			case len(found.errs) == 0 || domainxml.OnlyUnsupported(found.errs):
				// Valid, or valid but vmkit cannot run it yet: admitted (a
				// KubeVirt manifest applies), with a warning per field; the
				// VMI controller reports the same fields on the VMI.
				for _, e := range append(found.errs, found.warnings...) {
					resp.Warnings = append(resp.Warnings, object+": "+e.Error())
				}
			default:
				resp.Allowed = false
				resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
					Message: object + ": " + found.errs.ToAggregate().Error()}
			}
		}
		review.Response, review.Request = resp, nil
		writeJSON(w, http.StatusOK, review)
	}
}

// objectRef names the object under review, "VirtualMachine default/testvm",
// or, created with a generated name, "VirtualMachine default/testvm-*".
func objectRef(req *admissionv1.AdmissionRequest) string {
	name := req.Name
	if name == "" {
		var obj struct {
			Metadata struct {
				Name         string `json:"name"`
				GenerateName string `json:"generateName"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(req.Object.Raw, &obj) // undecodable: validate says so
		name = obj.Metadata.Name
		if name == "" && obj.Metadata.GenerateName != "" {
			name = obj.Metadata.GenerateName + "*"
		}
	}
	kind := req.Kind.Kind
	if kind == "" {
		kind = "object"
	}
	return kind + " " + path.Join(req.Namespace, name)
}

// gated reports what the cluster's feature gates do not allow, and the
// hostDisk paths no gate allows (podtemplate.DeniedHostDiskPath: the
// node's system directories), refused here at creation rather than by the
// VMI controller, which would leave the VMI without a pod.
func gated(vmi *v1.VirtualMachineInstance, gates []string) field.ErrorList {
	const why = " feature gate is not enabled (KubeVirt CR spec.configuration.developerConfiguration.featureGates)"
	var errs field.ErrorList
	for i, vol := range vmi.Spec.Volumes {
		if vol.HostDisk == nil {
			continue
		}
		fld := field.NewPath("spec", "volumes").Index(i).Child("hostDisk")
		if !slices.Contains(gates, podtemplate.HostDiskGate) {
			errs = append(errs, field.Forbidden(fld, "the "+podtemplate.HostDiskGate+why))
			continue
		}
		if p := vol.HostDisk.Path; path.IsAbs(p) {
			if denied := podtemplate.DeniedHostDiskPath(path.Clean(p)); denied != "" {
				errs = append(errs, field.Forbidden(fld.Child("path"), fmt.Sprintf("%s would expose the node's %s: a hostDisk may not reach the node's system directories", p, denied)))
			}
		}
	}
	if !slices.Contains(gates, podtemplate.VMPersistentStateGate) {
		if v1.PersistentTPM(&vmi.Spec) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "domain", "devices", "tpm", "persistent"), "the "+podtemplate.VMPersistentStateGate+why))
		}
		if v1.PersistentEFI(&vmi.Spec) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "domain", "firmware", "bootloader", "efi", "persistent"), "the "+podtemplate.VMPersistentStateGate+why))
		}
	}
	return errs
}

// specChanged reports whether an update changes the object's spec. An
// update of metadata or status alone (a finalizer, a label, the
// controller's status) is never refused, so an object stored before the
// webhook existed can still be deleted.
func specChanged(oldRaw, newRaw []byte) bool {
	var before, after struct {
		Spec json.RawMessage `json:"spec"`
	}
	if json.Unmarshal(oldRaw, &before) != nil || json.Unmarshal(newRaw, &after) != nil {
		return true
	}
	var a, b any
	if json.Unmarshal(before.Spec, &a) != nil || json.Unmarshal(after.Spec, &b) != nil {
		return true
	}
	return !reflect.DeepEqual(a, b)
}
