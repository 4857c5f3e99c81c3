package vm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	"github.com/vmkit/vmkit/vmapi/instancetype"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/kvconfig"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/migration"
	"github.com/vmkit/vmkit/vmcontrol/snapshot"
)

// GenerationAnnotation on a VMI holds the generation of the VM it was made from.
const GenerationAnnotation = "kubevirt.io/vm-generation"

// Crash-loop back-off: the delay after the n-th consecutive failure to start
// is BackoffBase·2^(n-1), plus up to 20% jitter, capped at BackoffCap.
const (
	BackoffBase = 10 * time.Second
	BackoffCap  = 5 * time.Minute
)

// firmwareUUIDNamespace derives stable guest UUIDs from VM names.
var firmwareUUIDNamespace = uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

// action is what a sync decided to do with the VM's instance.
type action int

const (
	actNone action = iota
	actStart
	actStop
)

// sync reconciles one VM: decide, act, then write status if it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // malformed keys never become valid
	}
	cached, err := c.vmLister.VirtualMachines(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		c.stale.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if c.stale.Stale(key, cached.ResourceVersion) {
		return nil // our own status write has not reached the cache; its event brings us back
	}
	vm := cached.DeepCopy()
	vmi, foreign, err := c.ownedVMI(ctx, vm)
	if err != nil {
		return err
	}
	now := c.now()
	st := state{now: now, foreignVMI: foreign}
	if foreign {
		vmi = nil // another controller's VMI: report it, never touch it
	}
	st.strategy, st.strategyErr = vm.RunStrategy()
	st.prevStrategy = vm.Status.RunStrategy
	st.unboundClaim = c.unboundClaim(vm)
	if c.claims != nil && vm.DeletionTimestamp == nil {
		st.snapshotStatuses = snapshot.VolumeSnapshotStatuses(vm, func(name string) *corev1.PersistentVolumeClaim {
			claim, err := c.claims.PersistentVolumeClaims(vm.Namespace).Get(name)
			if err != nil {
				return nil
			}
			return claim
		})
	}
	st.startFailure = updateStartFailure(vm.Status.StartFailure, vmi, now, c.jitter)
	st.requests = vm.Status.StateChangeRequests

	// The instance type and preference, pinned on the first sync. Until
	// they resolve, the status keeps the references it had.
	var itErr error // a failed API call, retried with back-off
	st.expansion.InstancetypeRef, st.expansion.PreferenceRef = vm.Status.InstancetypeRef, vm.Status.PreferenceRef
	if vm.DeletionTimestamp == nil && st.strategyErr == nil {
		x, err := c.resolveExpansion(ctx, vm)
		switch {
		case err != nil:
			itErr = err
		case x.err != nil:
			st.expansion.reason, st.expansion.err = x.reason, x.err
			c.reportExpansion(vm, x)
		default:
			st.expansion = x
		}
	}

	var dvErr error // a failed DataVolume create, retried with back-off
	if vm.DeletionTimestamp == nil && st.strategyErr == nil {
		if st.dataVolumes, dvErr = c.syncDataVolumes(ctx, vm, wantsRunning(st), st.expansion.Preference); dvErr != nil {
			st.dataVolumes = dataVolumes{waiting: true, reason: ReasonFailedCreate, err: dvErr}
		}
	}

	if vm.DeletionTimestamp == nil && st.strategyErr == nil && st.strategy == v1.RunStrategyHalted && vmi == nil && pendingStart(st.requests) {
		// A paused start of a halted VM (virt-api records it as a request):
		// the VM runs from now on, as in KubeVirt. The update's event
		// brings us back to start it.
		return c.setAlways(ctx, vm)
	}
	if vm.DeletionTimestamp != nil {
		// A deleted VM: its instance goes first, then the controller's
		// finalizer, whatever other finalizers hold the VM (#43).
		switch {
		case vmi != nil && vmi.DeletionTimestamp == nil && c.exp.Satisfied(key):
			st.actErr = c.stopVMI(ctx, key, vm, vmi)
			st.actReason = ReasonFailedDelete
		case vmi == nil && slices.Contains(vm.Finalizers, v1.VirtualMachineControllerFinalizer):
			if err := c.removeFinalizer(ctx, vm); err != nil {
				return err
			}
			return nil // the update's event brings the VM back, or it is gone
		}
	}
	var requeue time.Duration
	if vm.DeletionTimestamp == nil && c.exp.Satisfied(key) && st.strategyErr == nil && !foreign {
		act, remaining := decide(vmi, st)
		st.requests = remaining
		switch act {
		case actStart:
			if itErr != nil || st.expansion.err != nil {
				// An instance type event brings us back; a missing volume
				// to infer one from has none, so look again later.
				var missing *missingSourceError
				if errors.As(st.expansion.err, &missing) {
					requeue = time.Minute
				}
				break
			}
			if st.dataVolumes.waiting {
				break // a DataVolume event brings us back
			}
			if wait := st.backoffRemaining(); wait > 0 {
				requeue = wait
				break
			}
			vmi, st.actErr = c.startVMI(ctx, key, vm, st.expansion.Expansion, startsPaused(st.requests))
			st.actReason = ReasonFailedCreate
			st.requests = clearSatisfied(st.requests, vmi)
		case actStop:
			st.actErr = c.stopVMI(ctx, key, vm, vmi)
			st.actReason = ReasonFailedDelete
		}
	}
	var hotplugErr error // a failed VMI patch, retried with back-off
	if c.starts != nil {
		st.restartRequired = c.starts.restartRequired(vm, vmi, c.liveUpdate())
	}
	if vm.DeletionTimestamp == nil && !foreign && c.exp.Satisfied(key) {
		hotplugErr = errors.Join(c.hotplugCPU(ctx, vm, vmi), c.hotplugMemory(ctx, vm, vmi), c.hotplugVolumes(ctx, vm, vmi), c.handleMemoryDump(ctx, vm, vmi))
	}
	status := calculateStatus(vm, vmi, st)
	if !equality.Semantic.DeepEqual(status, vm.Status) {
		if log := klog.FromContext(ctx).V(5); log.Enabled() {
			log.Info("status changed", "vm", key, "diff", cmp.Diff(vm.Status, status))
		}
		vm.Status = status
		if _, err := c.client.VirtualMachines(ns).UpdateStatus(ctx, vm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating status of VirtualMachine %s: %w", key, err)
		}
		c.stale.Wrote(key, cached.ResourceVersion)
	}
	if err := errors.Join(st.actErr, dvErr, itErr, hotplugErr); err != nil {
		return err
	}
	if requeue > 0 {
		return reconcile.After(requeue)
	}
	return nil
}

// ownedVMI returns the VM's instance: the VMI of the same name if the VM
// owns it or adopts it. foreign is true when that VMI belongs to someone else.
func (c *Controller) ownedVMI(ctx context.Context, vm *v1.VirtualMachine) (vmi *v1.VirtualMachineInstance, foreign bool, err error) {
	vmi, err = c.vmiLister.VirtualMachineInstances(vm.Namespace).Get(vm.Name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	m := &controllerref.Manager{
		Owner:     vm,
		OwnerKind: v1.VirtualMachineGroupVersionKind,
		Match:     func(obj metav1.Object) bool { return obj.GetName() == vm.Name },
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := c.client.VirtualMachineInstances(vm.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		Live: func(ctx context.Context) (metav1.Object, error) {
			return c.client.VirtualMachines(vm.Namespace).Get(ctx, vm.Name, metav1.GetOptions{})
		},
	}
	owned, err := m.Claim(ctx, vmi)
	if err != nil {
		return nil, false, err
	}
	if !owned {
		return vmi, true, nil
	}
	return vmi.DeepCopy(), false, nil
}

// state carries what a sync learned, for deciding and for status.
type state struct {
	now         time.Time
	strategy    v1.VirtualMachineRunStrategy
	strategyErr error
	// prevStrategy is the run strategy the last sync saw
	// (status.runStrategy): "" for a new VM.
	prevStrategy v1.VirtualMachineRunStrategy
	// unboundClaim: a claim the VM's volumes name exists and is Pending.
	unboundClaim bool
	requests     []v1.VirtualMachineStateChangeRequest
	startFailure *v1.VirtualMachineStartFailure
	actErr       error
	actReason    string
	foreignVMI   bool
	dataVolumes  dataVolumes
	expansion    expansionResult
	// restartRequired: the spec changed since the running instance
	// started (startRevisions.restartRequired).
	restartRequired bool
	// snapshotStatuses is status.volumeSnapshotStatuses as the snapshot
	// controller computes it, written with the VM's status; nil keeps
	// what is there (the controller does not watch claims).
	snapshotStatuses []v1.VolumeSnapshotStatus
}

// backoffRemaining is how long a start must still wait after failures.
func (s state) backoffRemaining() time.Duration {
	if s.startFailure == nil || s.startFailure.RetryAfterTimestamp == nil {
		return 0
	}
	return s.startFailure.RetryAfterTimestamp.Sub(s.now)
}

// decide applies start/stop requests, or else the run strategy, to the
// current instance. It returns the action and the requests still pending.
func decide(vmi *v1.VirtualMachineInstance, st state) (action, []v1.VirtualMachineStateChangeRequest) {
	reqs := clearSatisfied(st.requests, vmi)
	if len(reqs) > 0 {
		switch r := reqs[0]; r.Action {
		case v1.StopRequest:
			if vmi != nil && vmi.DeletionTimestamp == nil {
				return actStop, reqs
			}
		case v1.StartRequest:
			switch {
			case vmi == nil:
				return actStart, reqs
			case vmi.IsFinal() && vmi.DeletionTimestamp == nil:
				return actStop, reqs // clear the old instance first
			}
		}
		return actNone, reqs
	}
	switch st.strategy {
	case v1.RunStrategyAlways:
		if vmi == nil {
			return actStart, nil
		}
		if vmi.IsFinal() && vmi.DeletionTimestamp == nil {
			return actStop, nil
		}
	case v1.RunStrategyRerunOnFailure:
		// As KubeVirt: a failed instance is replaced (removed, and a
		// start request recorded for the next one), a succeeded one is
		// removed and not restarted; without an instance the VM starts
		// only when it comes to this strategy from another (a new VM, a
		// changed strategy), so a user's stop or a guest's shutdown
		// sticks.
		if vmi == nil {
			if st.prevStrategy != v1.RunStrategyRerunOnFailure {
				return actStart, nil
			}
			return actNone, nil
		}
		if vmi.DeletionTimestamp == nil {
			switch vmi.Status.Phase {
			case v1.Failed:
				return actStop, []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest}}
			case v1.Succeeded:
				return actStop, nil
			}
		}
	case v1.RunStrategyOnce:
		if vmi == nil {
			return actStart, nil
		}
	case v1.RunStrategyHalted:
		if vmi != nil && vmi.DeletionTimestamp == nil {
			return actStop, nil
		}
	}
	return actNone, nil
}

// clearSatisfied drops requests already done: a Stop whose instance is gone
// (or was replaced), a Start whose instance exists and is not final.
func clearSatisfied(reqs []v1.VirtualMachineStateChangeRequest, vmi *v1.VirtualMachineInstance) []v1.VirtualMachineStateChangeRequest {
	for len(reqs) > 0 {
		r := reqs[0]
		done := false
		switch r.Action {
		case v1.StopRequest:
			done = vmi == nil || (r.UID != nil && *r.UID != vmi.UID)
		case v1.StartRequest:
			done = vmi != nil && !vmi.IsFinal() && vmi.DeletionTimestamp == nil
		default:
			done = true // unknown actions are dropped, not retried forever
		}
		if !done {
			break
		}
		reqs = reqs[1:]
	}
	if len(reqs) == 0 {
		return nil
	}
	return reqs
}

// updateStartFailure counts an instance that failed before it ever ran, and
// clears the count once an instance runs.
func updateStartFailure(prev *v1.VirtualMachineStartFailure, vmi *v1.VirtualMachineInstance, now time.Time, jitter func() float64) *v1.VirtualMachineStartFailure {
	if vmi == nil {
		return prev
	}
	if vmi.Status.Phase == v1.Running || (vmi.Status.Phase == v1.Succeeded && everRan(vmi)) {
		return nil
	}
	if vmi.Status.Phase != v1.Failed || everRan(vmi) {
		return prev
	}
	if prev != nil && prev.LastFailedVMIUID == vmi.UID {
		return prev // already counted
	}
	count := 1
	if prev != nil {
		count = prev.ConsecutiveFailCount + 1
	}
	retry := metav1.NewTime(now.Add(Backoff(count, jitter())).Truncate(time.Second))
	return &v1.VirtualMachineStartFailure{ConsecutiveFailCount: count, LastFailedVMIUID: vmi.UID, RetryAfterTimestamp: &retry}
}

// Backoff is the delay before restarting after the n-th consecutive start
// failure; jitter in [0,1) adds up to 20%.
func Backoff(n int, jitter float64) time.Duration {
	d := BackoffBase
	for i := 1; i < n && d < BackoffCap; i++ {
		d *= 2
	}
	d += time.Duration(float64(d) * 0.2 * jitter)
	return min(d, BackoffCap)
}

func everRan(vmi *v1.VirtualMachineInstance) bool {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == v1.Running {
			return true
		}
	}
	return false
}

// setMigratable gives a new instance its LiveMigratable condition and
// migration method, as migration.LiveMigratable computes them from its
// spec and claims. The VMI controller computes them again when it hands
// the instance over to its node (the claims may have been bound since),
// and the migration controller keeps them from then on; set from the
// start, they are in the VM's first status, which the hand-over then
// leaves alone: one VM status write fewer per start. Without a claim
// cache the VMI controller sets them alone.
func (c *Controller) setMigratable(vmi *v1.VirtualMachineInstance) {
	if c.claims == nil {
		return
	}
	cond, method := migration.LiveMigratable(vmi, func(namespace, name string) *corev1.PersistentVolumeClaim {
		claim, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
		if err != nil {
			return nil
		}
		return claim
	})
	now := metav1.NewTime(c.now())
	cond.LastProbeTime, cond.LastTransitionTime = now, now
	vmi.Status.Conditions = append(vmi.Status.Conditions, cond)
	vmi.Status.MigrationMethod = method
}

// startVMI creates the VM's instance from its template and expansion under
// expectations.
func (c *Controller) startVMI(ctx context.Context, key string, vm *v1.VirtualMachine, x Expansion, paused bool) (*v1.VirtualMachineInstance, error) {
	x.Cluster = kvconfig.Of(c.kubevirts)
	vmi, err := NewExpandedVMI(vm, x)
	if err != nil {
		return nil, err
	}
	if paused {
		s := v1.StartStrategyPaused
		vmi.Spec.StartStrategy = &s
	}
	if c.starts != nil {
		name, err := c.starts.ensure(ctx, vm)
		if err != nil {
			return nil, err
		}
		vmi.Status.VirtualMachineRevisionName = name
	}
	c.setMigratable(vmi)
	c.exp.ExpectCreations(key, 1)
	created, err := c.client.VirtualMachineInstances(vm.Namespace).Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		c.exp.CreationObserved(key)
		c.recorder.Eventf(vm, corev1.EventTypeWarning, "FailedCreate", "Error creating VirtualMachineInstance %s: %v", vmi.Name, err)
		return nil, fmt.Errorf("creating VirtualMachineInstance %s: %w", key, err)
	}
	c.recorder.Eventf(vm, corev1.EventTypeNormal, "SuccessfulCreate", "Started the virtual machine by creating the new virtual machine instance %s", created.Name)
	if c.starts != nil {
		// The instance runs: the revisions of earlier starts go. A failure
		// leaves them for the next start.
		if err := c.starts.prune(ctx, vm, vmi.Status.VirtualMachineRevisionName); err != nil {
			klog.FromContext(ctx).Error(err, "pruning start revisions", "vm", key)
		}
	}
	return created, nil
}

// NewVMI builds the instance a VM starts: the template's metadata and spec,
// the VM's name and namespace, a controller reference to the VM, the VMI
// controller's finalizer (saving it a write), and a firmware UUID derived from the VM's name when the
// template has none, so the guest sees the same UUID on every start.
// A VM naming an instance type or preference needs NewExpandedVMI.
func NewVMI(vm *v1.VirtualMachine) (*v1.VirtualMachineInstance, error) {
	if vm.Spec.Instancetype != nil || vm.Spec.Preference != nil {
		return nil, fmt.Errorf("VirtualMachine %s/%s names an instance type or preference: build its instance with NewExpandedVMI", vm.Namespace, vm.Name)
	}
	return NewExpandedVMI(vm, Expansion{})
}

// NewExpandedVMI is NewVMI with the VM's instance type and preference
// expanded into the instance (as vmapi/instancetype.Apply does, before the
// defaults), annotated with their names as KubeVirt does, and with the
// defaults of x.Cluster's configuration (v1.SetClusterDefaults). A template
// that conflicts with the instance type is an instancetype.Conflicts error.
func NewExpandedVMI(vm *v1.VirtualMachine, x Expansion) (*v1.VirtualMachineInstance, error) {
	if vm.Spec.Template == nil {
		return nil, fmt.Errorf("VirtualMachine %s/%s: spec.template is required to start it", vm.Namespace, vm.Name)
	}
	tmpl := vm.Spec.Template.DeepCopy()
	// The reserved labels steer the node agents and the migration
	// controller: a template's never reach the VMI (virt-api refuses them,
	// a VM stored while it was down loses them here).
	labels := v1.WithoutReservedVMILabels(tmpl.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.VirtualMachineLabel] = vm.Name
	annotations := maps.Clone(tmpl.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[GenerationAnnotation] = strconv.FormatInt(vm.Generation, 10)
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:            vm.Name,
			Namespace:       vm.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{controllerref.Ref(vm, v1.VirtualMachineGroupVersionKind)},
			Finalizers:      []string{v1.VirtualMachineControllerFinalizer},
		},
		Spec: tmpl.Spec,
	}
	if x.DropTemplateMemory {
		vmi.Spec.Domain.Memory = nil
	}
	// As KubeVirt: autoattach preferences first (they decide the devices
	// defaulting adds), the default pod interface before the interface
	// preferences (here: after, then its model is the preferred one).
	instancetype.ApplyAutoattachPreferences(&vmi.Spec, x.Preference)
	defaultInterface := len(vmi.Spec.Domain.Devices.Interfaces) == 0 && len(vmi.Spec.Networks) == 0
	target := *instancetype.VMTemplate(vm)
	target.Spec, target.Meta = &vmi.Spec, &vmi.ObjectMeta
	if c := instancetype.Apply(target, x.Instancetype, x.Preference); c != nil {
		return nil, fmt.Errorf("VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, c)
	}
	instancetype.Annotate(&vmi.ObjectMeta, x.InstancetypeRef, x.PreferenceRef)
	if err := kvconfig.SetDefaults(&vmi.Spec, x.Cluster); err != nil {
		return nil, fmt.Errorf("VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	if defaultInterface && x.Preference != nil && x.Preference.Devices != nil && x.Preference.Devices.PreferredInterfaceModel != "" {
		for i := range vmi.Spec.Domain.Devices.Interfaces {
			vmi.Spec.Domain.Devices.Interfaces[i].Model = x.Preference.Devices.PreferredInterfaceModel
		}
	}
	if vmi.Spec.Domain.Firmware == nil {
		vmi.Spec.Domain.Firmware = &v1.Firmware{}
	}
	if vmi.Spec.Domain.Firmware.UUID == "" {
		vmi.Spec.Domain.Firmware.UUID = types.UID(uuid.NewSHA1(firmwareUUIDNamespace, []byte(vm.Name)).String())
	}
	return vmi, nil
}

// stopVMI deletes the VM's instance under expectations.
func (c *Controller) stopVMI(ctx context.Context, key string, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	c.exp.ExpectDeletions(key, vmi.UID)
	err := c.client.VirtualMachineInstances(vm.Namespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &vmi.UID},
	})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		c.exp.DeletionObserved(key, vmi.UID) // gone or replaced already
		return nil
	case err != nil:
		c.exp.DeletionObserved(key, vmi.UID)
		c.recorder.Eventf(vm, corev1.EventTypeWarning, "FailedDelete", "Error deleting VirtualMachineInstance %s: %v", vmi.Name, err)
		return fmt.Errorf("deleting VirtualMachineInstance %s: %w", key, err)
	}
	c.recorder.Eventf(vm, corev1.EventTypeNormal, "SuccessfulDelete", "Stopped the virtual machine by deleting the virtual machine instance %s", vmi.UID)
	return nil
}

// removeFinalizer drops the controller's finalizer from a deleted VM with a
// JSON patch that tests the list it replaces, so another finalizer added or
// removed meanwhile is never lost (a conflict retries the sync).
func (c *Controller) removeFinalizer(ctx context.Context, vm *v1.VirtualMachine) error {
	kept := slices.DeleteFunc(slices.Clone(vm.Finalizers), func(f string) bool { return f == v1.VirtualMachineControllerFinalizer })
	patch, err := jsonpatch.Marshal(
		jsonpatch.Test("/metadata/finalizers", vm.Finalizers),
		jsonpatch.Replace("/metadata/finalizers", kept),
	)
	if err != nil {
		return err
	}
	_, err = c.client.VirtualMachines(vm.Namespace).Patch(ctx, vm.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing the finalizer %s of VirtualMachine %s/%s: %w", v1.VirtualMachineControllerFinalizer, vm.Namespace, vm.Name, err)
	}
	return nil
}

// unboundClaim reports whether a claim the VM's template mounts (a
// persistentVolumeClaim, dataVolume or ephemeral volume) exists and is not
// bound yet: KubeVirt's WaitingForVolumeBinding. False without a claim
// informer.
func (c *Controller) unboundClaim(vm *v1.VirtualMachine) bool {
	if c.claims == nil || vm.Spec.Template == nil {
		return false
	}
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		var name string
		switch src := &vol.VolumeSource; {
		case src.PersistentVolumeClaim != nil:
			name = src.PersistentVolumeClaim.ClaimName
		case src.DataVolume != nil:
			name = src.DataVolume.Name
		case src.Ephemeral != nil && src.Ephemeral.PersistentVolumeClaim != nil:
			name = src.Ephemeral.PersistentVolumeClaim.ClaimName
		}
		if name == "" {
			continue
		}
		if pvc, err := c.claims.PersistentVolumeClaims(vm.Namespace).Get(name); err == nil && pvc.Status.Phase == corev1.ClaimPending {
			return true
		}
	}
	return false
}

// pendingStart reports whether the first pending request is a Start.
func pendingStart(reqs []v1.VirtualMachineStateChangeRequest) bool {
	return len(reqs) > 0 && reqs[0].Action == v1.StartRequest
}

// startsPaused reports whether the Start request being served asks for a
// paused start (virt-api's start with paused: true).
func startsPaused(reqs []v1.VirtualMachineStateChangeRequest) bool {
	for _, r := range reqs {
		if r.Action == v1.StartRequest {
			return r.Data[v1.StartRequestDataPausedKey] == v1.StartRequestDataPausedTrue
		}
	}
	return false
}

// setAlways changes a halted VM's run strategy to Always (spec.running to
// true when the VM uses that field).
func (c *Controller) setAlways(ctx context.Context, vm *v1.VirtualMachine) error {
	patch := []byte(`{"spec":{"runStrategy":"Always"}}`)
	if vm.Spec.RunStrategy == nil && vm.Spec.Running != nil {
		patch = []byte(`{"spec":{"running":true}}`)
	}
	if _, err := c.client.VirtualMachines(vm.Namespace).Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the run strategy of VirtualMachine %s/%s to Always for its start request: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}
