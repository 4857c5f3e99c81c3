package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// StartRevisionLabel is on the ControllerRevisions holding the VM spec an
// instance was started from; its value is the VM's UID.
// Config.StartRevisions watches the revisions that carry it.
const StartRevisionLabel = "vmkit.io/vm-start-revision"

// StartRevisionName names the ControllerRevision of the VM spec an
// instance started from, as KubeVirt names it: revision-start-vm-<VM
// UID>-<VM generation>. The instance records it in
// status.virtualMachineRevisionName.
func StartRevisionName(vmUID types.UID, generation int64) string {
	return "revision-start-vm-" + string(vmUID) + "-" + strconv.FormatInt(generation, 10)
}

// RestartRequiredMessage is the message of the VM's RestartRequired
// condition, KubeVirt's: the VM's spec changed since its instance started,
// in a way the running instance does not take.
const RestartRequiredMessage = "a non-live-updatable field was changed in the template spec"

// startRevisions keeps the start revisions (nil without
// Config.StartRevisions).
type startRevisions struct {
	lister appslisters.ControllerRevisionLister
	// byVM indexes the revisions by startRevisionIndex: a VM's are found
	// without looking at every revision of its namespace, which at
	// thousands of VMs took a third of the controller's CPU.
	byVM   cache.Indexer
	client kubeclient.ControllerRevisionsGetter
}

// startRevisionIndex indexes start revisions by <namespace>/<VM UID>.
const startRevisionIndex = "vmkit-vm-start-revision"

// startRevisionKey is a start revision's startRevisionIndex value.
func startRevisionKey(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	uid, ok := m.GetLabels()[StartRevisionLabel]
	if !ok {
		return nil, nil
	}
	return []string{m.GetNamespace() + "/" + uid}, nil
}

// newStartRevisions indexes the informer's revisions by VM (before it
// starts, or after: client-go allows both).
func newStartRevisions(inf cache.SharedIndexInformer, client kubeclient.ControllerRevisionsGetter) (*startRevisions, error) {
	if _, ok := inf.GetIndexer().GetIndexers()[startRevisionIndex]; !ok {
		if err := inf.AddIndexers(cache.Indexers{startRevisionIndex: startRevisionKey}); err != nil {
			return nil, fmt.Errorf("vm controller: indexing the start revisions: %w", err)
		}
	}
	return &startRevisions{lister: appslisters.NewControllerRevisionLister(inf.GetIndexer()), byVM: inf.GetIndexer(), client: client}, nil
}

// revisionData is a start revision's data, KubeVirt's shape: the VM's spec.
type revisionData struct {
	Spec v1.VirtualMachineSpec `json:"spec"`
}

// ensure creates the start revision of vm at its generation unless it
// exists, with the instance type and preference revisions the status
// pinned, and returns its name.
func (s *startRevisions) ensure(ctx context.Context, vm *v1.VirtualMachine) (string, error) {
	name := StartRevisionName(vm.UID, vm.Generation)
	if _, err := s.lister.ControllerRevisions(vm.Namespace).Get(name); err == nil {
		return name, nil
	}
	spec := vm.Spec.DeepCopy()
	if spec.Instancetype != nil && vm.Status.InstancetypeRef != nil && vm.Status.InstancetypeRef.ControllerRevisionRef != nil {
		spec.Instancetype.RevisionName = vm.Status.InstancetypeRef.ControllerRevisionRef.Name
	}
	if spec.Preference != nil && vm.Status.PreferenceRef != nil && vm.Status.PreferenceRef.ControllerRevisionRef != nil {
		spec.Preference.RevisionName = vm.Status.PreferenceRef.ControllerRevisionRef.Name
	}
	data, err := json.Marshal(revisionData{Spec: *spec})
	if err != nil {
		return "", err
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       vm.Namespace,
			Labels:          map[string]string{StartRevisionLabel: string(vm.UID)},
			OwnerReferences: []metav1.OwnerReference{controllerref.Ref(vm, v1.VirtualMachineGroupVersionKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: vm.Generation,
	}
	_, err = s.client.ControllerRevisions(vm.Namespace).Create(ctx, cr, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ControllerRevision %s/%s of the spec VirtualMachine %s starts from: %w", vm.Namespace, name, vm.Name, err)
	}
	return name, nil
}

// prune deletes vm's start revisions other than keep (those of earlier
// starts), as KubeVirt keeps only the current one.
func (s *startRevisions) prune(ctx context.Context, vm *v1.VirtualMachine, keep string) error {
	objs, err := s.byVM.ByIndex(startRevisionIndex, vm.Namespace+"/"+string(vm.UID))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		cr, ok := obj.(*appsv1.ControllerRevision)
		if !ok || cr.Name == keep {
			continue
		}
		err := s.client.ControllerRevisions(vm.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cr.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ControllerRevision %s/%s of an earlier start of VirtualMachine %s: %w", vm.Namespace, cr.Name, vm.Name, err)
		}
	}
	return nil
}

// restartRequired reports whether vm's spec differs from the one its
// running instance started from (the instance's start revision) in
// anything the instance does not take while it runs. With liveUpdate
// (KubeVirt's LiveUpdate rollout strategy) more CPU sockets within the
// instance's maxSockets and more guest memory within its maxGuest are
// hot-plugged (liveupdate.go), and hotpluggable volumes come and go
// (volumehotplug.go); every other change of the template's spec,
// or of the instance type or preference named, needs a restart (KubeVirt's
// LiveUpdate also applies node selector, affinity and tolerations; vmkit
// does not yet). An instance
// without a revision (started before this controller kept them) is not
// judged.
func (s *startRevisions) restartRequired(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, liveUpdate bool) bool {
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.IsFinal() || vm.Spec.Template == nil {
		return false
	}
	name := vmi.Status.VirtualMachineRevisionName
	if name == "" {
		g, err := strconv.ParseInt(vmi.Annotations[GenerationAnnotation], 10, 64)
		if err != nil {
			return false
		}
		name = StartRevisionName(vm.UID, g)
	}
	cr, err := s.lister.ControllerRevisions(vm.Namespace).Get(name)
	if err != nil {
		return false
	}
	var started revisionData
	if err := json.Unmarshal(cr.Data.Raw, &started); err != nil || started.Spec.Template == nil {
		return false
	}
	was, now := started.Spec.Template.Spec.Domain.CPU, vm.Spec.Template.Spec.Domain.CPU
	if liveUpdate && hotpluggableSockets(was, now, vmi) {
		was.Sockets = now.Sockets
	}
	wasMem, nowMem := started.Spec.Template.Spec.Domain.Memory, vm.Spec.Template.Spec.Domain.Memory
	if liveUpdate && hotpluggableMemory(wasMem, nowMem, vmi) {
		wasMem.Guest = nowMem.Guest
	}
	// Hotpluggable volumes come and go while the instance runs
	// (volumehotplug.go).
	nowSpec := vm.Spec.Template.Spec.DeepCopy()
	withoutHotplugVolumes(&started.Spec.Template.Spec)
	withoutHotplugVolumes(nowSpec)
	return !apiequality.Semantic.DeepEqual(started.Spec.Template.Spec, *nowSpec) ||
		!sameMatcher(started.Spec.Instancetype, vm.Spec.Instancetype) ||
		!samePreference(started.Spec.Preference, vm.Spec.Preference)
}

// sameMatcher compares the instance type two specs name, not the revision
// the controller pinned.
func sameMatcher(a, b *v1.InstancetypeMatcher) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Kind == b.Kind
}

// samePreference is sameMatcher for preferences.
func samePreference(a, b *v1.PreferenceMatcher) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Kind == b.Kind
}
