package vmi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/kvconfig"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/migration"
	"github.com/vmkit/vmkit/vmcontrol/node"
)

// Reasons the controller reports on VMIs.
const (
	ReasonFailedCreate = "FailedCreate"
	// ReasonInvalidSpec: the VMI cannot run on any node (domainxml.Validate).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonUnsupported: the VMI asks for what vmkit cannot do yet (a GPU,
	// a host device, a TPM...; domainxml.Unsupported names the fields). It
	// stays Pending, without a launcher, until the spec changes.
	ReasonUnsupported  = "Unsupported"
	ReasonFailedDelete = "FailedDelete"
	ReasonPodFailed    = "PodFailed"
	ReasonPodDeleted   = "PodDeleted"
)

// observation is what a sync saw and did, for calculateStatus.
type observation struct {
	now time.Time
	// pods are the VMI's launcher pods; pod is the live one, if any.
	pods []*corev1.Pod
	pod  *corev1.Pod
	// podGone is true when the pod the VMI had is no longer there.
	podGone bool
	// syncErr is a failure to report in the Synchronized condition.
	syncErr *syncError
	// claims are the claims of the VMI's claim volumes, by name (for
	// status.volumeStatus).
	claims map[string]*corev1.PersistentVolumeClaim
	// claimLookup finds any claim of the VMI's namespace, for its
	// LiveMigratable condition; nil when the controller does not watch
	// claims (the migration controller keeps the condition then).
	claimLookup migration.ClaimLookup
	// memory is how a memory hotplug stands (memory.go); nil when none
	// is asked for.
	memory *memoryHotplug
}

type syncError struct {
	reason string
	err    error
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.vmiLister.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		c.stale.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if c.stale.Stale(key, cached.ResourceVersion) {
		return nil // our own write has not reached the cache; its event brings us back
	}
	vmi := cached.DeepCopy()
	pods, err := c.launcherPods(vmi)
	if err != nil {
		return err
	}
	obs := observation{now: c.now(), pods: pods}

	if vmi.DeletionTimestamp != nil || vmi.IsFinal() {
		if err := c.deletePods(ctx, key, vmi, pods); err != nil {
			return err
		}
		if vmi.DeletionTimestamp != nil {
			if len(pods) == 0 && c.exp.Satisfied(key) {
				return c.removeFinalizer(ctx, key, vmi)
			}
			return nil // pod deletions will bring us back
		}
		return c.writeStatus(ctx, key, vmi, obs)
	}

	var defaulted bool
	// Until the VMI has a pod (none seen, none being created), so that a
	// pod is never rendered from other defaults than its VMI keeps.
	if (vmi.Status.Phase == v1.VmPhaseUnset || vmi.Status.Phase == v1.Pending) && len(pods) == 0 && c.exp.Satisfied(key) {
		defaulted, err = setDefaults(vmi, kvconfig.Of(c.kubevirts))
		if err != nil {
			// The cluster's configuration cannot be applied: no pod until
			// it is fixed (KubeVirt's admission would refuse the VMI).
			return c.refuseDefaults(ctx, key, vmi, obs, err)
		}
	}
	if !slices.Contains(vmi.Finalizers, v1.VirtualMachineControllerFinalizer) || defaulted {
		if !slices.Contains(vmi.Finalizers, v1.VirtualMachineControllerFinalizer) {
			vmi.Finalizers = append(vmi.Finalizers, v1.VirtualMachineControllerFinalizer)
		}
		updated, err := c.client.VirtualMachineInstances(ns).Update(ctx, vmi, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("adding finalizer and defaults to VirtualMachineInstance %s: %w", key, err)
		}
		c.stale.Wrote(key, vmi.ResourceVersion)
		vmi = updated
	}

	obs.pod = livePod(pods, vmi.Status.NodeName)
	if obs.pod == nil && c.exp.Satisfied(key) {
		switch vmi.Status.Phase {
		case v1.VmPhaseUnset, v1.Pending:
			obs.pod, obs.syncErr = c.createPod(ctx, key, vmi)
		case v1.Scheduling, v1.Scheduled, v1.Running:
			obs.podGone = true
		}
	}
	if obs.pod != nil {
		obs.claims = c.claimsOf(vmi)
		if c.claimLister != nil {
			obs.claimLookup = func(namespace, name string) *corev1.PersistentVolumeClaim {
				claim, err := c.claimLister.PersistentVolumeClaims(namespace).Get(name)
				if err != nil {
					return nil
				}
				return claim
			}
		}
		if obs.memory, err = c.syncMemory(ctx, vmi, obs.pod); err != nil {
			return err
		}
	}
	if err := c.writeStatus(ctx, key, vmi, obs); err != nil {
		return err
	}
	if obs.syncErr != nil && obs.syncErr.reason == ReasonFailedCreate && !isRenderError(obs.syncErr.err) {
		return obs.syncErr.err // transient: retry with back-off
	}
	return nil
}

// setDefaults fills in the spec defaults of a new VMI (v1.SetClusterDefaults
// with kv's configuration: the default pod interface, buses, grace period,
// requests, machine type, CPU model) and reports whether anything changed.
// KubeVirt's admission webhook does this at creation; here the controller's
// first write of the VMI does it, before the launcher pod is rendered, so
// the stored VMI shows what the guest gets. A VMI the VM controller created has them already.
func setDefaults(vmi *v1.VirtualMachineInstance, kv *v1.KubeVirt) (bool, error) {
	before := vmi.Spec.DeepCopy()
	if err := kvconfig.SetDefaults(&vmi.Spec, kv); err != nil {
		return false, err
	}
	return !equality.Semantic.DeepEqual(before, &vmi.Spec), nil
}

// refuseDefaults reports a KubeVirt CR configuration the VMI's defaults
// cannot be taken from: a Synchronized=False condition with reason
// InvalidSpec naming the CR's field, and one event per change of it. The VMI
// stays Pending without a pod, and the sync fails so that it is retried
// with back-off; defaults are applied again at each sync until the VMI has
// a pod, so a fixed configuration applies at the next one.
func (c *Controller) refuseDefaults(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, obs observation, err error) error {
	obs.syncErr = &syncError{reason: ReasonInvalidSpec, err: fmt.Errorf("cannot default VirtualMachineInstance %s: %w", key, err)}
	if old := vmi.VMICondition(v1.VirtualMachineInstanceSynchronized); old == nil || old.Message != obs.syncErr.err.Error() {
		c.recorder.Event(vmi, corev1.EventTypeWarning, ReasonInvalidSpec, obs.syncErr.err.Error())
	}
	if werr := c.writeStatus(ctx, key, vmi, obs); werr != nil {
		return werr
	}
	return obs.syncErr.err // retried with back-off: an edit of the CR does not enqueue VMIs
}

// writeStatus computes the status and, once the VMI is scheduled, the
// kubevirt.io/nodeName label, and writes both in one Update if either changed
// (the VMI has no status subresource, as in KubeVirt).
func (c *Controller) writeStatus(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, obs observation) error {
	status := calculateStatus(vmi, obs)
	node := status.NodeName
	relabel := node != "" && vmi.Labels[v1.NodeNameLabel] != node
	timeline := startTimeline(vmi, obs.pod, &status, obs.now)
	if !relabel && timeline == nil && equality.Semantic.DeepEqual(status, vmi.Status) {
		return nil
	}
	if log := klog.FromContext(ctx).V(5); log.Enabled() {
		log.Info("status changed", "vmi", key, "diff", cmp.Diff(vmi.Status, status), "node", node)
	}
	old := vmi.Status.Phase
	vmi.Status = status
	if relabel {
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[v1.NodeNameLabel] = node
	}
	if timeline != nil {
		recordStartTimeline(vmi, timeline)
	}
	updated, err := c.client.VirtualMachineInstances(vmi.Namespace).Update(ctx, vmi, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of VirtualMachineInstance %s: %w", key, err)
	}
	c.stale.Wrote(key, vmi.ResourceVersion)
	if status.Phase != old && c.onPhaseChange != nil {
		c.onPhaseChange(updated, status.Phase)
	}
	if timeline != nil {
		c.recorder.Eventf(updated, corev1.EventTypeNormal, ReasonStartTimeline, "Started in %s", timeline)
		if c.onStartTimeline != nil {
			c.onStartTimeline(updated, timeline)
		}
	}
	return nil
}

// launcherPods returns the pods the VMI controls, oldest first.
func (c *Controller) launcherPods(vmi *v1.VirtualMachineInstance) ([]*corev1.Pod, error) {
	labelled, err := podindex.Of(c.podIndexer, vmi)
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, p := range labelled {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == vmi.UID {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return pods, nil
}

// livePod is the newest pod that is not being deleted and, once the VMI
// has a node, runs on it (KubeVirt's current VMI pod): a live migration's
// target pod, on another node, is not the VMI's until the node agents move
// status.nodeName to it, so its failure does not fail the VMI.
func livePod(pods []*corev1.Pod, node string) *corev1.Pod {
	for i := len(pods) - 1; i >= 0; i-- {
		if pods[i].DeletionTimestamp == nil && (node == "" || pods[i].Spec.NodeName == node) {
			return pods[i]
		}
	}
	return nil
}

type renderError struct{ err error }

func (e *renderError) Error() string { return e.err.Error() }
func (e *renderError) Unwrap() error { return e.err }

func isRenderError(err error) bool {
	var r *renderError
	return errors.As(err, &r)
}

// createPod renders and creates the launcher pod under expectations.
func (c *Controller) createPod(ctx context.Context, key string, vmi *v1.VirtualMachineInstance) (*corev1.Pod, *syncError) {
	if missing := c.missingClaim(vmi); missing != nil {
		// One event per change of the condition, not one per sync.
		if old := vmi.VMICondition(v1.VirtualMachineInstanceSynchronized); old == nil || old.Status != corev1.ConditionFalse ||
			old.Reason != missing.reason || old.Message != missing.err.Error() {
			c.recorder.Event(vmi, corev1.EventTypeWarning, missing.reason, missing.err.Error())
		}
		return nil, missing
	}
	if c.validate != nil {
		if errs := c.validate(vmi); len(errs) > 0 {
			err := errs.ToAggregate()
			reason, what := ReasonInvalidSpec, "Cannot run"
			if domainxml.OnlyUnsupported(errs) {
				reason, what = ReasonUnsupported, "vmkit cannot run yet"
			}
			if old := vmi.VMICondition(v1.VirtualMachineInstanceSynchronized); old == nil || old.Reason != reason || old.Message != err.Error() {
				c.recorder.Eventf(vmi, corev1.EventTypeWarning, reason, "%s VirtualMachineInstance %s: %v", what, key, err)
			}
			return nil, &syncError{reason: reason, err: &renderError{err}}
		}
	}
	pod, err := c.renderer.RenderLaunchPod(vmi)
	if err != nil {
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Cannot render the launcher pod: %v", err)
		return nil, &syncError{reason: ReasonFailedCreate, err: &renderError{err}}
	}
	c.avoidUnresponsiveNodes(pod)
	// The claim the pod mounts for the VM's persistent state, if any.
	if serr := c.ensureBackendStorage(ctx, key, vmi); serr != nil {
		return nil, serr
	}
	c.exp.ExpectCreations(key, 1)
	created, err := c.kube.Pods(vmi.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.exp.CreationObserved(key)
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating pod: %v", err)
		return nil, &syncError{reason: ReasonFailedCreate, err: fmt.Errorf("creating launcher pod of VirtualMachineInstance %s: %w", key, err)}
	}
	c.recorder.Eventf(vmi, corev1.EventTypeNormal, "SuccessfulCreate", "Created virtual machine pod %s", created.Name)
	return created, nil
}

// avoidUnresponsiveNodes keeps pod off the nodes whose node agent is
// unresponsive now: each term of its required node affinity (a new one if
// it has none) gets metadata.name NotIn those nodes. See Config.Nodes.
func (c *Controller) avoidUnresponsiveNodes(pod *corev1.Pod) {
	if c.nodes == nil {
		return
	}
	now := c.now()
	var names []string
	for _, obj := range c.nodes.List() {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Labels[v1.NodeSchedulable] == "false" {
			continue // the node selector keeps the pod off already
		}
		if unresponsive, _ := node.Unresponsive(n, c.heartbeat, now); unresponsive {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	// The API server allows exactly one value in a metadata.name field
	// requirement, so each node is a requirement of its own (a term's
	// requirements are ANDed): with a list of two, every launcher pod was
	// refused as invalid while two nodes were unresponsive (hack/density
	// found it at 8,000 VMs, once the fake nodes' heartbeats aged).
	avoid := make([]corev1.NodeSelectorRequirement, 0, len(names))
	for _, name := range names {
		avoid = append(avoid, corev1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpNotIn, Values: []string{name}})
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchFields = append(terms[i].MatchFields, avoid...)
	}
}

// deletePods deletes the VMI's pods that are not already being deleted.
func (c *Controller) deletePods(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, pods []*corev1.Pod) error {
	var errs []error
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		c.exp.ExpectDeletions(key, pod.UID)
		err := c.kube.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			c.exp.DeletionObserved(key, pod.UID)
		case err != nil:
			c.exp.DeletionObserved(key, pod.UID)
			c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting pod %s: %v", pod.Name, err)
			errs = append(errs, fmt.Errorf("deleting launcher pod %s/%s: %w", pod.Namespace, pod.Name, err))
		default:
			c.recorder.Eventf(vmi, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted virtual machine pod %s", pod.Name)
		}
	}
	return errors.Join(errs...)
}

// removeFinalizer lets a deleted VMI go once its pods are gone.
func (c *Controller) removeFinalizer(ctx context.Context, key string, vmi *v1.VirtualMachineInstance) error {
	if !slices.Contains(vmi.Finalizers, v1.VirtualMachineControllerFinalizer) {
		return nil
	}
	vmi.Finalizers = slices.DeleteFunc(vmi.Finalizers, func(f string) bool { return f == v1.VirtualMachineControllerFinalizer })
	_, err := c.client.VirtualMachineInstances(vmi.Namespace).Update(ctx, vmi, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer from VirtualMachineInstance %s: %w", key, err)
	}
	c.stale.Wrote(key, vmi.ResourceVersion)
	return nil
}
