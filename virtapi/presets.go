package virtapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	informers "github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Presets (kubevirt.io/v1 VirtualMachineInstancePreset, deprecated
// upstream) as KubeVirt's virt-api applied them, in its mutating webhook on
// VMI creation.
const (
	// MutateVMIPath is the path of the VMI mutating webhook (KubeVirt's).
	MutateVMIPath = "/virtualmachineinstances-mutate"
	// PresetAnnotationPrefix + a preset's name is the annotation a VMI
	// gets for each preset applied to it; its value is kubevirt.io/v1.
	PresetAnnotationPrefix = "virtualmachinepreset.kubevirt.io/"
	// PresetExcludeAnnotation set to "true" keeps presets off a VMI.
	PresetExcludeAnnotation = "virtualmachineinstancepresets.admission.kubevirt.io/exclude"
	// PresetDeprecationWarning is the warning of an admission that applied
	// a preset (KubeVirt's).
	PresetDeprecationWarning = "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."
)

// ApplyPresets applies to vmi the presets of its namespace whose selector
// matches its labels, as KubeVirt did: of each preset's domain,
// resources.requests, cpu, firmware, clock (offset and timer), features,
// devices.watchdog and ioThreadsPolicy are copied where the VMI leaves them
// unset; a preset counts as applied (and the VMI gets its annotation) when
// some part of it now equals the VMI's. Two matching presets that set the
// same part differently are a conflict: the VMI is refused. A VMI annotated
// with PresetExcludeAnnotation "true" is left alone. It returns the names
// of the presets applied.
func ApplyPresets(vmi *v1.VirtualMachineInstance, presets []v1.VirtualMachineInstancePreset) ([]string, error) {
	if vmi.Annotations[PresetExcludeAnnotation] == "true" {
		return nil, nil
	}
	var matching []v1.VirtualMachineInstancePreset
	for _, p := range presets {
		if p.Namespace != vmi.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("VirtualMachineInstancePreset %s/%s: spec.selector: %w", p.Namespace, p.Name, err)
		}
		if sel.Matches(labels.Set(vmi.Labels)) {
			matching = append(matching, p)
		}
	}
	sort.Slice(matching, func(i, j int) bool { return matching[i].Name < matching[j].Name })
	var conflicts []string
	for i := range matching {
		for j := range i {
			for _, c := range presetConflicts(matching[i].Spec.Domain, matching[j].Spec.Domain) {
				conflicts = append(conflicts, fmt.Sprintf("presets %q and %q conflict: %s", matching[i].Name, matching[j].Name, c))
			}
		}
	}
	if len(conflicts) > 0 {
		return nil, errors.New("VirtualMachinePresets cannot be applied due to conflicts: " + strings.Join(conflicts, "; "))
	}
	var applied []string
	for _, p := range matching {
		if p.Spec.Domain == nil || !mergePreset(p.Spec.Domain, &vmi.Spec.Domain) {
			continue
		}
		if vmi.Annotations == nil {
			vmi.Annotations = map[string]string{}
		}
		vmi.Annotations[PresetAnnotationPrefix+p.Name] = v1.SchemeGroupVersion.String()
		applied = append(applied, p.Name)
	}
	return applied, nil
}

// presetConflicts lists the parts two domains both set, differently.
func presetConflicts(a, b *v1.DomainSpec) []string {
	if a == nil || b == nil {
		return nil
	}
	var out []string
	for name, q := range a.Resources.Requests {
		if r, ok := b.Resources.Requests[name]; ok && q.Cmp(r) != 0 {
			out = append(out, fmt.Sprintf("resources.requests.%s: %s != %s", name, q.String(), r.String()))
		}
	}
	both := func(field string, x, y any, set bool) {
		if set && !equality.Semantic.DeepEqual(x, y) {
			out = append(out, field+" differs")
		}
	}
	both("cpu", a.CPU, b.CPU, a.CPU != nil && b.CPU != nil)
	both("firmware", a.Firmware, b.Firmware, a.Firmware != nil && b.Firmware != nil)
	if a.Clock != nil && b.Clock != nil {
		both("clock offset", a.Clock.ClockOffset, b.Clock.ClockOffset, true)
		both("clock.timer", a.Clock.Timer, b.Clock.Timer, a.Clock.Timer != nil && b.Clock.Timer != nil)
	}
	both("features", a.Features, b.Features, a.Features != nil && b.Features != nil)
	both("devices.watchdog", a.Devices.Watchdog, b.Devices.Watchdog, a.Devices.Watchdog != nil && b.Devices.Watchdog != nil)
	both("ioThreadsPolicy", a.IOThreadsPolicy, b.IOThreadsPolicy, a.IOThreadsPolicy != nil && b.IOThreadsPolicy != nil)
	sort.Strings(out)
	return out
}

// mergePreset copies what p sets and d leaves unset, and reports whether
// any part of p now equals d's.
func mergePreset(p *v1.DomainSpec, d *v1.DomainSpec) bool {
	applied := false
	same := func(x, y any) {
		if equality.Semantic.DeepEqual(x, y) {
			applied = true
		}
	}
	if len(p.Resources.Requests) > 0 {
		if d.Resources.Requests == nil {
			d.Resources.Requests = p.Resources.Requests.DeepCopy()
		}
		same(d.Resources.Requests, p.Resources.Requests)
	}
	if p.CPU != nil {
		if d.CPU == nil {
			d.CPU = p.CPU.DeepCopy()
		}
		same(d.CPU, p.CPU)
	}
	if p.Firmware != nil {
		if d.Firmware == nil {
			d.Firmware = p.Firmware.DeepCopy()
		}
		same(d.Firmware, p.Firmware)
	}
	if p.Clock != nil {
		if d.Clock == nil {
			d.Clock = &v1.Clock{ClockOffset: *p.Clock.ClockOffset.DeepCopy()}
		}
		same(d.Clock, p.Clock)
		if p.Clock.Timer != nil {
			if d.Clock.Timer == nil {
				d.Clock.Timer = p.Clock.Timer.DeepCopy()
			}
			same(d.Clock.Timer, p.Clock.Timer)
		}
	}
	if p.Features != nil {
		if d.Features == nil {
			d.Features = p.Features.DeepCopy()
		}
		same(d.Features, p.Features)
	}
	if p.Devices.Watchdog != nil {
		if d.Devices.Watchdog == nil {
			d.Devices.Watchdog = p.Devices.Watchdog.DeepCopy()
		}
		same(d.Devices.Watchdog, p.Devices.Watchdog)
	}
	if p.IOThreadsPolicy != nil {
		if d.IOThreadsPolicy == nil {
			policy := *p.IOThreadsPolicy
			d.IOThreadsPolicy = &policy
		}
		same(d.IOThreadsPolicy, p.IOThreadsPolicy)
	}
	return applied
}

// PresetHandler serves the VMI mutating webhook at MutateVMIPath: on
// create, the presets list returns (those of the VMI's namespace) are
// applied with ApplyPresets and the answer is a JSON patch of the VMI's
// metadata.annotations and spec.domain, with KubeVirt's deprecation warning
// when a preset was applied; a conflict between presets refuses the VMI
// (422). Other operations are admitted unchanged.
func PresetHandler(list func(namespace string) ([]v1.VirtualMachineInstancePreset, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		if review.Request.Operation == admissionv1.Create {
			if err := mutateWithPresets(review.Request, resp, list); err != nil {
				resp.Allowed = false
				resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: err.Error()}
			}
		}
		review.Response, review.Request = resp, nil
		writeJSON(w, http.StatusOK, review)
	})
}

func mutateWithPresets(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse, list func(string) ([]v1.VirtualMachineInstancePreset, error)) error {
	vmi := &v1.VirtualMachineInstance{}
	if err := json.Unmarshal(req.Object.Raw, vmi); err != nil {
		return fmt.Errorf("decoding VirtualMachineInstance %s/%s: %w", req.Namespace, req.Name, err)
	}
	if vmi.Namespace == "" {
		vmi.Namespace = req.Namespace
	}
	presets, err := list(vmi.Namespace)
	if err != nil {
		return fmt.Errorf("listing VirtualMachineInstancePresets of namespace %s: %w", vmi.Namespace, err)
	}
	applied, err := ApplyPresets(vmi, presets)
	if err != nil || len(applied) == 0 {
		return err
	}
	patch, err := jsonpatch.Marshal(
		jsonpatch.Replace("/spec/domain", vmi.Spec.Domain),
		jsonpatch.Add("/metadata/annotations", vmi.Annotations),
	)
	if err != nil {
		return err
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	resp.Warnings = []string{PresetDeprecationWarning}
	return nil
}

// presetSyncTimeout bounds how long an admission waits for the preset
// informer's first list (the API server gives the webhook 10 s).
const presetSyncTimeout = 5 * time.Second

// watchPresets starts an informer of every namespace's
// VirtualMachineInstancePresets, stopped when ctx ends, and returns
// PresetHandler's list function over it. Until the informer has listed
// once, a list waits up to presetSyncTimeout and then fails (the VMI is
// refused and the client retries) rather than admit a VMI without its
// presets.
func (s *Server) watchPresets(ctx context.Context) func(namespace string) ([]v1.VirtualMachineInstancePreset, error) {
	factory := informers.NewSharedInformerFactory(s.cfg.Kubevirt, 0)
	informer := factory.Kubevirt().V1().VirtualMachineInstancePresets()
	lister := informer.Lister()
	synced := informer.Informer().HasSynced
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return func(namespace string) ([]v1.VirtualMachineInstancePreset, error) {
		if !synced() {
			wait, cancel := context.WithTimeout(ctx, presetSyncTimeout)
			defer cancel()
			if !cache.WaitForCacheSync(wait.Done(), synced) {
				return nil, errors.New("the VirtualMachineInstancePreset informer has not synced yet")
			}
		}
		list, err := lister.VirtualMachineInstancePresets(namespace).List(labels.Everything())
		if err != nil {
			return nil, err
		}
		out := make([]v1.VirtualMachineInstancePreset, len(list))
		for i, p := range list {
			out[i] = *p
		}
		return out, nil
	}
}
