package vm

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	instancetypelisters "github.com/vmkit/vmkit/vmapi/generated/listers/instancetype/v1beta1"
	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// RevisionSelector selects the ControllerRevisions holding instance types
// and preferences, the only ones Config.Revisions needs to watch.
const RevisionSelector = instancetype.ControllerRevisionObjectKindLabel

// Reasons of the Failure condition about instance types and preferences,
// as KubeVirt's.
const (
	// ReasonFailedFindInstancetype: the instance type (or its pinned
	// revision) cannot be found, or inferred from the volume.
	ReasonFailedFindInstancetype = "FailedFindInstancetype"
	// ReasonFailedFindPreference: the same for the preference.
	ReasonFailedFindPreference = "FailedFindPreference"
)

// Expansion is what a VM's instance type and preference give its instances:
// their specs as the VM pinned them in ControllerRevisions, and the
// references recorded in the VM's status. The zero Expansion expands nothing.
type Expansion struct {
	Instancetype *instancetypev1beta1.VirtualMachineInstancetypeSpec
	Preference   *instancetypev1beta1.VirtualMachinePreferenceSpec
	// InstancetypeRef and PreferenceRef name them (status.instancetypeRef,
	// status.preferenceRef) and go into the instance's annotations.
	InstancetypeRef, PreferenceRef *v1.InstancetypeStatusRef
	// DropTemplateMemory: the instance type was inferred from a volume with
	// the Ignore policy, under which the template's domain.memory is only a
	// fallback for when inference fails (as in KubeVirt).
	DropTemplateMemory bool
	// Cluster, if set, is the KubeVirt CR whose configuration decides the
	// defaults v1.SetClusterDefaults names; nil: KubeVirt's defaults.
	Cluster *v1.KubeVirt
}

// instancetypes are a controller's sources of instance types, preferences
// and their revisions; nil when it was given none.
type instancetypes struct {
	instancetypes        instancetypelisters.VirtualMachineInstancetypeLister
	clusterInstancetypes instancetypelisters.VirtualMachineClusterInstancetypeLister
	preferences          instancetypelisters.VirtualMachinePreferenceLister
	clusterPreferences   instancetypelisters.VirtualMachineClusterPreferenceLister
	revisions            appslisters.ControllerRevisionLister
	revisionClient       kubeclient.ControllerRevisionsGetter
}

// expansionResult is what a sync resolved of a VM's instance type and
// preference: the expansion to start instances with, or why it cannot.
type expansionResult struct {
	Expansion
	// reason and err are the Failure condition's; a VM with an err does
	// not start.
	reason string
	err    error
}

// errNoInstancetypes: the controller was not given instance type informers.
var errNoInstancetypes = errors.New("the VM controller does not watch instancetype.kubevirt.io (its Config has no instance type informers)")

// resolveExpansion resolves the VM's instance type and preference: the copies
// it pinned in ControllerRevisions, or, the first time (or after the matcher
// changed), the current objects, checked against the template and then
// pinned in new ControllerRevisions. The returned error is a failed API
// call, to retry; problems of the VM's own making are in the result.
func (c *Controller) resolveExpansion(ctx context.Context, vm *v1.VirtualMachine) (expansionResult, error) {
	var x expansionResult
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return x, nil
	}
	if c.it == nil {
		x.reason, x.err = ReasonFailedFindInstancetype, errNoInstancetypes
		return x, nil
	}
	itRef, itObj, dropMemory, err := c.resolveInstancetype(vm)
	if err != nil {
		return failed(ReasonFailedFindInstancetype, err)
	}
	prefRef, prefObj, err := c.resolvePreference(vm)
	if err != nil {
		return failed(ReasonFailedFindPreference, err)
	}
	x.InstancetypeRef, x.PreferenceRef, x.DropTemplateMemory = itRef, prefRef, dropMemory
	if x.Instancetype, err = specOf(itObj, instancetype.InstancetypeSpec); err != nil {
		return failed(ReasonFailedFindInstancetype, err)
	}
	if x.Preference, err = specOf(prefObj, instancetype.PreferenceSpec); err != nil {
		return failed(ReasonFailedFindPreference, err)
	}
	if err := check(vm, &x.Expansion); err != nil {
		return failed(ReasonFailedCreate, err)
	}
	// Pin what is not pinned yet. A revision from an earlier sync whose
	// status write failed is found and reused.
	for _, p := range []struct {
		ref *v1.InstancetypeStatusRef
		obj instancetype.Object
	}{{itRef, itObj}, {prefRef, prefObj}} {
		if p.ref == nil || p.ref.ControllerRevisionRef != nil {
			continue
		}
		name, err := c.storeRevision(ctx, vm, p.obj)
		if err != nil {
			return failed(ReasonFailedCreate, fmt.Errorf("error encountered while storing instancetype.kubevirt.io controllerRevisions: %w", err))
		}
		p.ref.ControllerRevisionRef = &v1.ControllerRevisionRef{Name: name}
	}
	return x, nil
}

// failed reports a problem with the VM's instance type or preference in
// the result, or returns a failed API call to retry.
func failed(reason string, err error) (expansionResult, error) {
	if isTransient(err) {
		return expansionResult{}, err
	}
	return expansionResult{reason: reason, err: err}, nil
}

// isTransient reports a failed API call (other than a missing object): a
// retry may cure it. Everything else is the VM's to fix, or an object's
// that has to appear.
func isTransient(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && !apierrors.IsNotFound(err)
}

func specOf[S any](obj instancetype.Object, get func(instancetype.Object) (*S, error)) (*S, error) {
	if obj == nil {
		return nil, nil
	}
	return get(obj)
}

// check is what KubeVirt's VM admission checks: the preference's spread
// topology and requirements, and that the template sets nothing the
// instance type sets.
func check(vm *v1.VirtualMachine, x *Expansion) error {
	if err := instancetype.CheckSpreadTopology(x.Instancetype, x.Preference); err != nil {
		return err
	}
	tmpl := vm.DeepCopy()
	if tmpl.Spec.Template == nil {
		return fmt.Errorf("VirtualMachine %s/%s: spec.template is required", vm.Namespace, vm.Name)
	}
	if x.DropTemplateMemory {
		tmpl.Spec.Template.Spec.Domain.Memory = nil
	}
	if err := instancetype.CheckRequirements(x.Instancetype, x.Preference, &tmpl.Spec.Template.Spec); err != nil {
		return fmt.Errorf("failure checking preference requirements: %w", err)
	}
	if c := instancetype.Apply(*instancetype.VMTemplate(tmpl), x.Instancetype, x.Preference); c != nil {
		return fmt.Errorf("error encountered while storing instancetype.kubevirt.io controllerRevisions: %w", c)
	}
	return nil
}

// resolveInstancetype returns the status reference of the VM's instance
// type and the object: the pinned copy when the reference names a revision,
// else the current object (and a reference without revision).
func (c *Controller) resolveInstancetype(vm *v1.VirtualMachine) (*v1.InstancetypeStatusRef, instancetype.Object, bool, error) {
	m := vm.Spec.Instancetype
	if m == nil {
		return nil, nil, false, nil
	}
	name, kind := m.Name, m.Kind
	dropMemory := false
	old := vm.Status.InstancetypeRef
	if m.InferFromVolume != "" {
		if old != nil && old.InferFromVolume == m.InferFromVolume && old.Name != "" && old.ControllerRevisionRef != nil {
			name, kind = old.Name, old.Kind // inferred already: the pinned copy stays
		} else {
			var err error
			name, kind, err = c.inferFromVolume(vm, m.InferFromVolume, instancetype.DefaultInstancetypeLabel, instancetype.DefaultInstancetypeKindLabel)
			if err != nil {
				if ignoreInference(m.InferFromVolumeFailurePolicy, err) {
					return nil, nil, false, nil
				}
				return nil, nil, false, fmt.Errorf("unable to infer the instance type from volume %s: %w", m.InferFromVolume, err)
			}
		}
		dropMemory = ignore(m.InferFromVolumeFailurePolicy)
	}
	ref := syncRef(old, name, kind, m.RevisionName, m.InferFromVolume, m.InferFromVolumeFailurePolicy)
	obj, err := c.pinnedOrCurrent(vm, ref, func() (instancetype.Object, error) {
		k, err := instancetype.InstancetypeKind(ref.Kind)
		if err != nil {
			return nil, err
		}
		var obj instancetype.Object
		if k == instancetype.KindInstancetype {
			obj, err = c.it.instancetypes.VirtualMachineInstancetypes(vm.Namespace).Get(ref.Name)
		} else {
			obj, err = c.it.clusterInstancetypes.Get(ref.Name)
		}
		return obj, err
	})
	return ref, obj, dropMemory, err
}

// resolvePreference is resolveInstancetype for the preference.
func (c *Controller) resolvePreference(vm *v1.VirtualMachine) (*v1.InstancetypeStatusRef, instancetype.Object, error) {
	m := vm.Spec.Preference
	if m == nil {
		return nil, nil, nil
	}
	name, kind := m.Name, m.Kind
	old := vm.Status.PreferenceRef
	if m.InferFromVolume != "" {
		if old != nil && old.InferFromVolume == m.InferFromVolume && old.Name != "" && old.ControllerRevisionRef != nil {
			name, kind = old.Name, old.Kind
		} else {
			var err error
			name, kind, err = c.inferFromVolume(vm, m.InferFromVolume, instancetype.DefaultPreferenceLabel, instancetype.DefaultPreferenceKindLabel)
			if err != nil {
				if ignoreInference(m.InferFromVolumeFailurePolicy, err) {
					return nil, nil, nil
				}
				return nil, nil, fmt.Errorf("unable to infer the preference from volume %s: %w", m.InferFromVolume, err)
			}
		}
	}
	ref := syncRef(old, name, kind, m.RevisionName, m.InferFromVolume, m.InferFromVolumeFailurePolicy)
	obj, err := c.pinnedOrCurrent(vm, ref, func() (instancetype.Object, error) {
		k, err := instancetype.PreferenceKind(ref.Kind)
		if err != nil {
			return nil, err
		}
		var obj instancetype.Object
		if k == instancetype.KindPreference {
			obj, err = c.it.preferences.VirtualMachinePreferences(vm.Namespace).Get(ref.Name)
		} else {
			obj, err = c.it.clusterPreferences.Get(ref.Name)
		}
		return obj, err
	})
	return ref, obj, err
}

// syncRef is the status reference for a matcher, as KubeVirt keeps it: a
// change of name, kind or inferred-from volume drops the pinned revision
// (the next one is stored from the current object); a revision name in the
// matcher pins that revision.
func syncRef(old *v1.InstancetypeStatusRef, name, kind, revisionName, inferFrom string, policy *v1.InferFromVolumeFailurePolicy) *v1.InstancetypeStatusRef {
	ref := &v1.InstancetypeStatusRef{}
	if old != nil {
		ref = old.DeepCopy()
	}
	if name != ref.Name || kind != ref.Kind || inferFrom != ref.InferFromVolume {
		ref.Name, ref.Kind, ref.InferFromVolume = name, kind, inferFrom
		ref.ControllerRevisionRef = nil
	}
	ref.InferFromVolumeFailurePolicy = nil
	if policy != nil {
		p := *policy
		ref.InferFromVolumeFailurePolicy = &p
	}
	if revisionName != "" {
		ref.ControllerRevisionRef = &v1.ControllerRevisionRef{Name: revisionName}
	}
	return ref
}

// pinnedOrCurrent reads the revision the reference pins, or else the
// current object with current.
func (c *Controller) pinnedOrCurrent(vm *v1.VirtualMachine, ref *v1.InstancetypeStatusRef, current func() (instancetype.Object, error)) (instancetype.Object, error) {
	if ref.ControllerRevisionRef == nil {
		return current()
	}
	rev, err := c.it.revisions.ControllerRevisions(vm.Namespace).Get(ref.ControllerRevisionRef.Name)
	if apierrors.IsNotFound(err) {
		// Created by this controller a moment ago, or by a user, and not yet
		// in the cache: ask the API server.
		rev, err = c.it.revisionClient.ControllerRevisions(vm.Namespace).Get(context.TODO(), ref.ControllerRevisionRef.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("ControllerRevision %s of %s %s: %w", ref.ControllerRevisionRef.Name, ref.Kind, ref.Name, err)
	}
	return instancetype.FromRevision(rev)
}

// storeRevision creates the ControllerRevision pinning obj for the VM and
// returns its name. One that exists already with the same spec is reused.
func (c *Controller) storeRevision(ctx context.Context, vm *v1.VirtualMachine, obj instancetype.Object) (string, error) {
	rev, err := instancetype.NewControllerRevision(vm, obj)
	if err != nil {
		return "", err
	}
	revs := c.it.revisionClient.ControllerRevisions(vm.Namespace)
	_, err = revs.Create(ctx, rev, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var existing *appsv1.ControllerRevision
		if existing, err = revs.Get(ctx, rev.Name, metav1.GetOptions{}); err != nil {
			return "", fmt.Errorf("reading ControllerRevision %s/%s: %w", vm.Namespace, rev.Name, err)
		}
		if same, err := instancetype.SameObject(rev, existing); err != nil || !same {
			return "", fmt.Errorf("found existing ControllerRevision with unexpected data: %s/%s", vm.Namespace, rev.Name)
		}
		return rev.Name, nil
	}
	if err != nil {
		return "", fmt.Errorf("creating ControllerRevision %s/%s: %w", vm.Namespace, rev.Name, err)
	}
	return rev.Name, nil
}

func ignore(policy *v1.InferFromVolumeFailurePolicy) bool {
	return policy != nil && *policy == v1.IgnoreInferFromVolumeFailure
}

// ignoreInference: with the Ignore policy, a volume that names nothing (or
// cannot) leaves the VM without instance type or preference.
func ignoreInference(policy *v1.InferFromVolumeFailurePolicy, err error) bool {
	var unsupported *inferenceError
	return ignore(policy) && errors.As(err, &unsupported)
}

// enqueueUsers enqueues the VMs naming an instance type or preference (of
// the given kind) that was added, changed or deleted, so that a VM waiting
// for it starts.
func (c *Controller) enqueueUsers(kind string) func(obj any) {
	return func(obj any) {
		o, ok := reconcile.Unwrap(obj).(metav1.Object)
		if !ok {
			return
		}
		vms, err := c.vmLister.List(labels.Everything())
		if err != nil {
			return
		}
		for _, vm := range vms {
			if o.GetNamespace() != "" && vm.Namespace != o.GetNamespace() {
				continue
			}
			if names(vm, kind, o.GetName()) {
				c.loop.Queue.Add(vm.Namespace + "/" + vm.Name)
			}
		}
	}
}

// names reports whether the VM's matchers (or, for inferred ones, its
// status) name the object.
func names(vm *v1.VirtualMachine, kind, name string) bool {
	match := func(mName, mKind string, ref *v1.InstancetypeStatusRef, kindOf func(string) (string, error)) bool {
		if mName == "" && ref != nil {
			mName, mKind = ref.Name, ref.Kind
		}
		k, err := kindOf(mKind)
		return err == nil && k == kind && mName == name
	}
	if m := vm.Spec.Instancetype; m != nil && match(m.Name, m.Kind, vm.Status.InstancetypeRef, instancetype.InstancetypeKind) {
		return true
	}
	if m := vm.Spec.Preference; m != nil && match(m.Name, m.Kind, vm.Status.PreferenceRef, instancetype.PreferenceKind) {
		return true
	}
	return false
}

// addInstancetypeHandlers wires the informers' events to the VMs they concern.
func (c *Controller) addInstancetypeHandlers(cfg Config) error {
	for kind, inf := range map[string]cache.SharedIndexInformer{
		instancetype.KindInstancetype: cfg.Instancetypes, instancetype.KindClusterInstancetype: cfg.ClusterInstancetypes,
		instancetype.KindPreference: cfg.Preferences, instancetype.KindClusterPreference: cfg.ClusterPreferences,
	} {
		enqueue := c.enqueueUsers(kind)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			return err
		}
	}
	// A revision deleted from under its VM is reported on the VM.
	_, err := cfg.Revisions.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRevisionOwner,
		DeleteFunc: c.enqueueRevisionOwner,
	})
	return err
}

func (c *Controller) enqueueRevisionOwner(obj any) {
	rev, ok := reconcile.Unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(rev); ref != nil && ref.Kind == v1.VirtualMachineGroupVersionKind.Kind {
		c.loop.Queue.Add(rev.GetNamespace() + "/" + ref.Name)
	}
}
