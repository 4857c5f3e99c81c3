package virtapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// KubeVirt's messages, which scripts written for virtctl match.
const (
	msgVMRunning     = "VM is already running"
	msgVMNotRunning  = "VM is not running"
	msgVMINotRunning = "VMI is not running"
	msgVMINotPaused  = "VMI is not paused"
	msgAlreadyPaused = "VMI is already paused"
	msgUnderway      = "unable to complete request: stop/start already underway"
)

var (
	vmResource  = v1.Resource("virtualmachine")
	vmiResource = v1.Resource("virtualmachineinstance")
)

func conflict(r schema.GroupResource, name, format string, args ...any) error {
	return apierrors.NewConflict(r, name, fmt.Errorf(format, args...))
}

// decodeBody reads an optional JSON body into out; an empty body leaves it
// zero. It writes the error and returns false on a bad body.
func decodeBody(w http.ResponseWriter, r *http.Request, out any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("reading the request body: "+err.Error()))
		return false
	}
	if len(body) == 0 {
		return true
	}
	if err := json.Unmarshal(body, out); err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("decoding the request body as %T: %v", out, err)))
		return false
	}
	return true
}

// patchError turns a failed patch into what KubeVirt answers: a failed
// test (someone changed the object since we read it) is a conflict.
func patchError(name string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		return conflict(vmResource, name, "%v", err)
	}
	if apierrors.IsNotFound(err) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// runningPatch sets the run strategy to Always (running) or Halted, or
// spec.running when the VM uses it, testing the old value first.
func runningPatch(vm *v1.VirtualMachine, running bool) []jsonpatch.Op {
	if vm.Spec.RunStrategy != nil || vm.Spec.Running == nil {
		strategy := v1.RunStrategyHalted
		if running {
			strategy = v1.RunStrategyAlways
		}
		return []jsonpatch.Op{jsonpatch.Test("/spec/runStrategy", vm.Spec.RunStrategy), jsonpatch.Replace("/spec/runStrategy", strategy)}
	}
	return []jsonpatch.Op{jsonpatch.Test("/spec/running", vm.Spec.Running), jsonpatch.Replace("/spec/running", running)}
}

// changeRequestPatch records state change requests on the VM's status, as
// KubeVirt does: on an empty status it adds one; otherwise it tests the
// pending requests and adds to none, or replaces them with a lone Stop.
func changeRequestPatch(vm *v1.VirtualMachine, changes ...v1.VirtualMachineStateChangeRequest) ([]jsonpatch.Op, error) {
	var ops []jsonpatch.Op
	if equality.Semantic.DeepEqual(vm.Status, v1.VirtualMachineStatus{}) {
		ops = append(ops, jsonpatch.Add("/status", v1.VirtualMachineStatus{StateChangeRequests: changes}))
		return ops, nil
	}
	ops = append(ops, jsonpatch.Test("/status/stateChangeRequests", vm.Status.StateChangeRequests))
	switch {
	case len(vm.Status.StateChangeRequests) == 0:
		ops = append(ops, jsonpatch.Add("/status/stateChangeRequests", changes))
	case len(changes) == 1 && changes[0].Action == v1.StopRequest:
		ops = append(ops, jsonpatch.Replace("/status/stateChangeRequests", changes))
	default:
		return nil, errors.New(msgUnderway)
	}
	if vm.Status.StartFailure != nil {
		ops = append(ops, jsonpatch.Remove("/status/startFailure"))
	}
	return ops, nil
}

func (s *Server) patchVM(ctx context.Context, vm *v1.VirtualMachine, status bool, ops []jsonpatch.Op, dryRun []string) error {
	body, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	vms := s.cfg.Kubevirt.KubevirtV1().VirtualMachines(vm.Namespace)
	opts := metav1.PatchOptions{DryRun: dryRun}
	if status {
		_, err = vms.Patch(ctx, vm.Name, types.JSONPatchType, body, opts, "status")
	} else {
		_, err = vms.Patch(ctx, vm.Name, types.JSONPatchType, body, opts)
	}
	if err != nil {
		return patchError(vm.Name, err)
	}
	return nil
}

// vmAndVMI reads the VM and its instance (nil when there is none).
func (s *Server) vmAndVMI(ctx context.Context, ns, name string) (*v1.VirtualMachine, *v1.VirtualMachineInstance, error) {
	vm, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	vmi, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return vm, nil, nil
	}
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	return vm, vmi, nil
}

// vmRequest serves PUT on a VM subresource: the optional body decoded into
// the request's options, then do; 202 Accepted once done, as KubeVirt
// answers (the controllers act on what do recorded).
func vmRequest[T any](do func(ctx context.Context, ns, name string, opts T) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var opts T
		if !decodeBody(w, r, &opts) {
			return
		}
		if err := do(r.Context(), r.PathValue("namespace"), r.PathValue("name"), opts); err != nil {
			writeStatus(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func (s *Server) start(ctx context.Context, ns, name string, opts v1.StartOptions) error {
	vm, vmi, err := s.vmAndVMI(ctx, ns, name)
	if err != nil {
		return err
	}
	if vmi != nil && !vmi.IsFinal() && vmi.Status.Phase != v1.Unknown && vmi.Status.Phase != v1.VmPhaseUnset {
		return conflict(vmResource, name, msgVMRunning)
	}
	strategy, err := vm.RunStrategy()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	start := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	if opts.Paused {
		start.Data = map[string]string{v1.StartRequestDataPausedKey: v1.StartRequestDataPausedTrue}
	}
	switch strategy {
	case v1.RunStrategyHalted:
		templatePaused := vm.Spec.Template != nil && vm.Spec.Template.Spec.StartStrategy != nil && *vm.Spec.Template.Spec.StartStrategy == v1.StartStrategyPaused
		if opts.Paused && !templatePaused {
			// The VM controller starts it paused and sets the run
			// strategy to Always itself.
			ops, err := changeRequestPatch(vm, start)
			if err != nil {
				return apierrors.NewInternalError(err)
			}
			return s.patchVM(ctx, vm, true, ops, opts.DryRun)
		}
		return s.patchVM(ctx, vm, false, runningPatch(vm, true), opts.DryRun)
	case v1.RunStrategyRerunOnFailure, v1.RunStrategyManual:
		changes := []v1.VirtualMachineStateChangeRequest{start}
		switch {
		case vmi != nil && strategy == v1.RunStrategyRerunOnFailure && vmi.Status.Phase == v1.Failed:
			return conflict(vmResource, name, "%v does not support starting VM from failed state", strategy)
		case vmi != nil && (strategy == v1.RunStrategyManual && vmi.IsFinal() || vmi.Status.Phase == v1.Succeeded):
			uid := vmi.UID
			changes = []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: &uid}, start}
		}
		ops, err := changeRequestPatch(vm, changes...)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		return s.patchVM(ctx, vm, true, ops, opts.DryRun)
	default: // Always, Once
		return conflict(vmResource, name, "%v does not support manual start requests", strategy)
	}
}

func (s *Server) stop(ctx context.Context, ns, name string, opts v1.StopOptions) error {
	if opts.GracePeriod != nil && *opts.GracePeriod < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("gracePeriod %d: it has to be greater or equal to 0", *opts.GracePeriod))
	}
	vm, vmi, err := s.vmAndVMI(ctx, ns, name)
	if err != nil {
		return err
	}
	strategy, err := vm.RunStrategy()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	running := vmi != nil && !vmi.IsFinal()
	var oldGrace int64
	if running && opts.GracePeriod != nil {
		// A shorter grace period for this stop goes on the instance, which
		// the node agent reads when it shuts the guest down.
		ops := []jsonpatch.Op{jsonpatch.Test("/spec/terminationGracePeriodSeconds", vmi.Spec.TerminationGracePeriodSeconds)}
		if vmi.Spec.TerminationGracePeriodSeconds != nil {
			oldGrace = *vmi.Spec.TerminationGracePeriodSeconds
			ops = append(ops, jsonpatch.Replace("/spec/terminationGracePeriodSeconds", *opts.GracePeriod))
		} else {
			ops = append(ops, jsonpatch.Add("/spec/terminationGracePeriodSeconds", *opts.GracePeriod))
		}
		body, _ := jsonpatch.Marshal(ops...)
		if _, err := s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(ns).Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{DryRun: opts.DryRun}); err != nil {
			return patchError(name, err)
		}
	}
	switch strategy {
	case v1.RunStrategyHalted, v1.RunStrategyRerunOnFailure, v1.RunStrategyManual:
		if !running {
			return conflict(vmResource, name, msgVMNotRunning)
		}
		if strategy == v1.RunStrategyHalted && (opts.GracePeriod == nil || vmi.Spec.TerminationGracePeriodSeconds != nil && *opts.GracePeriod >= oldGrace) {
			return conflict(vmResource, name, "%v only supports manual stop requests with a shorter graceperiod", strategy)
		}
		uid := vmi.UID
		ops, err := changeRequestPatch(vm, v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid})
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		return s.patchVM(ctx, vm, true, ops, opts.DryRun)
	default: // Always, Once
		return s.patchVM(ctx, vm, false, runningPatch(vm, false), opts.DryRun)
	}
}

func (s *Server) restart(ctx context.Context, ns, name string, opts v1.RestartOptions) error {
	if g := opts.GracePeriodSeconds; g != nil && *g > 0 {
		return apierrors.NewBadRequest("For force restart, only gracePeriod=0 is supported for now")
	} else if g != nil && *g < 0 {
		return apierrors.NewBadRequest("gracePeriod has to be greater or equal to 0")
	}
	vm, vmi, err := s.vmAndVMI(ctx, ns, name)
	if err != nil {
		return err
	}
	strategy, err := vm.RunStrategy()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if strategy == v1.RunStrategyHalted || strategy == v1.RunStrategyOnce {
		// KubeVirt's message, spelling included.
		return conflict(vmResource, name, "RunStategy %v does not support manual restart requests", strategy)
	}
	if vmi == nil {
		return conflict(vmResource, name, "VM is not running: %v", v1.RunStrategyHalted)
	}
	uid := vmi.UID
	ops, err := changeRequestPatch(vm, v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if err := s.patchVM(ctx, vm, true, ops, opts.DryRun); err != nil {
		return err
	}
	if opts.GracePeriodSeconds == nil || len(opts.DryRun) > 0 {
		return nil
	}
	// A forced restart: delete the running launcher pod at once (one
	// second, the shortest safe grace period), as KubeVirt does.
	pods, err := s.cfg.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: string(vmi.UID)}).String(),
	})
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		grace := int64(1)
		if err := s.cfg.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
			return apierrors.NewInternalError(err)
		}
	}
	return nil
}

func (s *Server) migrateVM(w http.ResponseWriter, r *http.Request) {
	var opts v1.MigrateOptions
	if !decodeBody(w, r, &opts) {
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if len(opts.AddedNodeSelector) > 0 {
		writeStatus(w, apierrors.NewBadRequest("addedNodeSelector: not supported by vmkit's VirtualMachineInstanceMigration yet"))
		return
	}
	_, vmi, err := s.vmAndVMI(r.Context(), ns, name)
	switch {
	case err != nil:
		writeStatus(w, err)
		return
	case vmi == nil:
		writeStatus(w, apierrors.NewNotFound(v1.Resource("virtualmachineinstance"), name))
		return
	case vmi.Status.Phase != v1.Running:
		writeStatus(w, conflict(vmResource, name, msgVMNotRunning))
		return
	}
	_, err = s.cfg.Kubevirt.KubevirtV1().VirtualMachineInstanceMigrations(ns).Create(r.Context(), &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubevirt-migrate-vm-"},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: name},
	}, metav1.CreateOptions{DryRun: opts.DryRun})
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
