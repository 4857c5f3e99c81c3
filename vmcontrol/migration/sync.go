package migration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// Event reasons (KubeVirt's).
const (
	ReasonSuccessfulCreate       = "SuccessfulCreate"
	ReasonFailedCreate           = "FailedCreate"
	ReasonSuccessfulDelete       = "SuccessfulDelete"
	ReasonFailedDelete           = "FailedDelete"
	ReasonSuccessfulHandOver     = "SuccessfulHandOver"
	ReasonFailedHandOver         = "FailedHandOver"
	ReasonSuccessfulMigration    = "SuccessfulMigration"
	ReasonFailedMigration        = "FailedMigration"
	ReasonSuccessfulAbort        = "SuccessfulAbortMigration"
	ReasonFailedAbort            = "FailedAbortMigration"
	ReasonTargetPodUnschedulable = "migrationTargetPodUnschedulable"
)

// Finalizer keeps a migration until it is final (KubeVirt's).
const Finalizer = "kubevirt.io/migrationJobFinalize"

var everything = labels.Everything()

// event is an event to record on the migration once its status is written.
type event struct{ typ, reason, msg string }

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	m, err := c.migrations.VirtualMachineInstanceMigrations(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		c.handedOff.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	// The finalizer and the selector label first, as KubeVirt's webhook
	// and controller add them; the update brings us back.
	if m.DeletionTimestamp == nil && !m.IsFinal() && (!slices.Contains(m.Finalizers, Finalizer) || m.Labels[v1.MigrationSelectorLabel] != m.Spec.VMIName) {
		m = m.DeepCopy()
		if !slices.Contains(m.Finalizers, Finalizer) {
			m.Finalizers = append(m.Finalizers, Finalizer)
		}
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[v1.MigrationSelectorLabel] = m.Spec.VMIName
		if _, err := c.client.VirtualMachineInstanceMigrations(ns).Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("adding the finalizer to VirtualMachineInstanceMigration %s: %w", key, err)
		}
		return nil
	}
	vmi, err := c.vmis.VirtualMachineInstances(ns).Get(m.Spec.VMIName)
	if apierrors.IsNotFound(err) {
		vmi, err = nil, nil
	}
	if err != nil {
		return err
	}
	if vmi == nil && m.DeletionTimestamp == nil && !m.IsFinal() && m.Status.Phase != v1.MigrationPhaseUnset {
		// KubeVirt deletes the migrations of a deleted VMI.
		klog.FromContext(ctx).V(2).Info("deleting the migration of a deleted VMI", "migration", key)
		if err := c.client.VirtualMachineInstanceMigrations(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting VirtualMachineInstanceMigration %s of a deleted VMI: %w", key, err)
		}
		return nil
	}
	var pod *corev1.Pod
	if vmi != nil {
		if pod, err = c.targetPod(m, vmi); err != nil {
			return err
		}
	}
	var syncErr error
	if vmi != nil && c.exp.Satisfied(key) {
		syncErr = c.act(ctx, key, m, vmi, pod)
	}
	status, events := c.nextStatus(m, vmi, pod, c.isHandedOff(key, m, vmi))
	if before := m.Status.Phase; !equality.Semantic.DeepEqual(status, m.Status) {
		updated := m.DeepCopy()
		updated.Status = status
		if m, err = c.client.VirtualMachineInstanceMigrations(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("writing the status of VirtualMachineInstanceMigration %s: %w", key, err)
		}
		for _, e := range events {
			c.recorder.Event(m, e.typ, e.reason, e.msg)
		}
		if status.Phase != before {
			klog.FromContext(ctx).Info("migration phase", "migration", key, "vmi", m.Spec.VMIName, "phase", status.Phase)
		}
	}
	if m.IsFinal() {
		if err := c.finish(ctx, key, m, vmi, pod); err != nil {
			return err
		}
	}
	return syncErr
}

// finish cleans up after a final migration: the target pod of a failed
// one, the finalizer, migrations beyond KeepFinalized, and it lets the
// pending migrations try again.
func (c *Controller) finish(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) error {
	if m.Status.Phase == v1.MigrationFailed && pod != nil && pod.DeletionTimestamp == nil && vmi != nil && pod.Spec.NodeName != vmi.Status.NodeName && c.exp.Satisfied(key) {
		ms := vmi.Status.MigrationState
		if ms == nil || ms.MigrationUID != m.UID || ms.Failed {
			if err := c.deletePod(ctx, key, m, pod, fmt.Sprintf("migration failed: deleted target pod %s/%s", pod.Namespace, pod.Name)); err != nil {
				return err
			}
		}
	}
	if i := slices.Index(m.Finalizers, Finalizer); i >= 0 {
		m = m.DeepCopy()
		m.Finalizers = slices.Delete(m.Finalizers, i, i+1)
		if _, err := c.client.VirtualMachineInstanceMigrations(m.Namespace).Update(ctx, m, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizer of VirtualMachineInstanceMigration %s: %w", key, err)
		}
	}
	if err := c.collectGarbage(ctx, m.Namespace, m.Spec.VMIName); err != nil {
		return err
	}
	for _, o := range c.migrationIndexer.List() {
		if p, ok := o.(*v1.VirtualMachineInstanceMigration); ok && p.Status.Phase == v1.MigrationPending {
			c.loop.Enqueue(p)
		}
	}
	return nil
}

// collectGarbage deletes the oldest final migrations of a VMI beyond
// KeepFinalized, with the pod each left behind: the target pod of a failed
// one, the source pod of a successful one.
func (c *Controller) collectGarbage(ctx context.Context, namespace, vmiName string) error {
	all, err := MigrationsOf(c.migrationIndexer, namespace, vmiName)
	if err != nil {
		return err
	}
	var final []*v1.VirtualMachineInstanceMigration
	for _, m := range all {
		if m.IsFinal() && m.DeletionTimestamp == nil {
			final = append(final, m)
		}
	}
	if len(final) <= KeepFinalized {
		return nil
	}
	slices.SortFunc(final, func(a, b *v1.VirtualMachineInstanceMigration) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for _, m := range final[:len(final)-KeepFinalized] {
		if ms := m.Status.MigrationState; ms != nil {
			old := ""
			if ms.Failed {
				old = ms.TargetPod
			} else if ms.Completed {
				old = ms.SourcePod
			}
			if old != "" {
				if err := c.kube.Pods(namespace).Delete(ctx, old, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("deleting pod %s/%s of old migration %s: %w", namespace, old, m.Name, err)
				}
			}
		}
		if err := c.client.VirtualMachineInstanceMigrations(namespace).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old VirtualMachineInstanceMigration %s/%s: %w", namespace, m.Name, err)
		}
	}
	return nil
}

// targetPod is the migration's target launcher pod (the newest, if there
// are several), nil if there is none.
func (c *Controller) targetPod(m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	pods, err := podindex.Of(c.podIndexer, vmi)
	if err != nil {
		return nil, err
	}
	var out *corev1.Pod
	for _, p := range pods {
		if p.Labels[v1.MigrationJobLabel] == string(m.UID) {
			if out == nil || out.CreationTimestamp.Before(&p.CreationTimestamp) {
				out = p
			}
		}
	}
	return out, nil
}

// isHandedOff reports whether the migration was handed to the node
// agents: the VMI's migration state names it, or the handoff patch was
// sent and the cache has not caught up.
func (c *Controller) isHandedOff(key string, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) bool {
	if vmi != nil && vmi.Status.MigrationState != nil && vmi.Status.MigrationState.MigrationUID == m.UID {
		return true
	}
	_, ok := c.handedOff.Load(key)
	return ok
}

// act does what the migration's phase asks of the controller: create the
// target pod, time it out, hand off to the node agents, cancel.
func (c *Controller) act(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) error {
	if vmi.DeletionTimestamp != nil {
		return nil
	}
	ms := vmi.Status.MigrationState
	synced := ms != nil && ms.MigrationUID == m.UID
	if synced && ms.Completed {
		return nil // the node agents finished it
	}
	if !c.canMigrate(m, vmi) {
		return nil
	}
	switch m.Status.Phase {
	case v1.MigrationPending:
		if m.DeletionTimestamp != nil {
			return c.cancelBeforeHandoff(ctx, key, m, pod)
		}
		if pod == nil {
			if cond := migratableCondition(vmi); cond != nil && cond.Status == corev1.ConditionFalse {
				return nil // the status fails it
			}
			return c.createTargetPod(ctx, key, m, vmi)
		}
		return c.checkPendingTimeout(ctx, key, m, vmi, pod)
	case v1.MigrationScheduling:
		if m.DeletionTimestamp != nil {
			return c.cancelBeforeHandoff(ctx, key, m, pod)
		}
		if pod != nil {
			return c.checkPendingTimeout(ctx, key, m, vmi, pod)
		}
	case v1.MigrationScheduled:
		if m.DeletionTimestamp != nil && !c.isHandedOff(key, m, vmi) {
			return c.cancelBeforeHandoff(ctx, key, m, pod)
		}
		if pod != nil && podReady(pod) {
			return c.handOff(ctx, key, m, vmi, pod)
		}
	case v1.MigrationPreparingTarget, v1.MigrationTargetReady:
		if (pod == nil || podDown(pod)) && synced && ms.StartTimestamp == nil && !ms.Failed && !ms.Completed {
			return c.markFailedOnVMI(ctx, m, vmi, "Target pod is down")
		}
		if m.DeletionTimestamp != nil && synced {
			return c.requestAbort(ctx, m, vmi)
		}
	case v1.MigrationRunning:
		if m.DeletionTimestamp != nil && synced {
			return c.requestAbort(ctx, m, vmi)
		}
	case v1.MigrationFailed:
		if synced && !ms.Failed {
			reason := "Target pod is down"
			if m.DeletionTimestamp != nil {
				reason = "Migration was canceled"
			}
			return c.markFailedOnVMI(ctx, m, vmi, reason)
		}
	}
	return nil
}

// canMigrate reports whether no other unfinished migration holds the VMI
// (KubeVirt's canMigrateVMI).
func (c *Controller) canMigrate(m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	if ms == nil || ms.MigrationUID == "" || ms.MigrationUID == m.UID {
		return true
	}
	others, _ := MigrationsOf(c.migrationIndexer, vmi.Namespace, vmi.Name)
	for _, o := range others {
		if o.UID == ms.MigrationUID {
			return o.IsFinal()
		}
	}
	return true
}

// createTargetPod creates the target pod if the VMI runs with one active
// pod and the parallel limits allow; otherwise it looks again later.
func (c *Controller) createTargetPod(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) error {
	if !vmi.IsRunning() {
		return nil // the VMI's next change brings us back
	}
	c.startMu.Lock()
	defer c.startMu.Unlock()
	log := klog.FromContext(ctx)
	if len(vmi.Status.ActivePods) > 1 {
		log.V(2).Info("waiting for the pods of a previous migration to go", "migration", key, "activePods", len(vmi.Status.ActivePods))
		return reconcile.After(time.Second)
	}
	cfg := Configuration(c.kubevirts)
	running, outbound := c.countRunning(vmi.Status.NodeName)
	if running >= int(*cfg.ParallelMigrationsPerCluster) {
		log.Info("waiting: parallel migrations at the cluster limit", "migration", key, "running", running, "limit", *cfg.ParallelMigrationsPerCluster)
		return reconcile.After(5 * time.Second)
	}
	if outbound >= int(*cfg.ParallelOutboundMigrationsPerNode) {
		log.Info("waiting: outbound migrations at the node limit", "migration", key, "node", vmi.Status.NodeName, "outbound", outbound, "limit", *cfg.ParallelOutboundMigrationsPerNode)
		return reconcile.After(5 * time.Second)
	}
	pod, err := c.renderer.RenderMigrationTargetPod(vmi, m)
	if err != nil {
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating pod: %v", err)
		return fmt.Errorf("rendering the target pod of VirtualMachineInstanceMigration %s: %w", key, err)
	}
	c.exp.ExpectCreations(key, 1)
	created, err := c.kube.Pods(vmi.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.exp.CreationObserved(key)
		c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating pod: %v", err)
		return fmt.Errorf("creating the target pod of VirtualMachineInstanceMigration %s: %w", key, err)
	}
	log.Info("created migration target pod", "migration", key, "pod", created.Name)
	c.recorder.Eventf(m, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created migration target pod %s", created.Name)
	return nil
}

// countRunning counts the migrations in flight (past Pending, or Pending
// with a target pod, or with a pod creation not yet seen) in the cluster
// and those leaving node.
func (c *Controller) countRunning(node string) (running, outbound int) {
	for _, o := range c.migrationIndexer.List() {
		m, ok := o.(*v1.VirtualMachineInstanceMigration)
		if !ok || m.IsFinal() {
			continue
		}
		vmi, err := c.vmis.VirtualMachineInstances(m.Namespace).Get(m.Spec.VMIName)
		if err != nil {
			continue
		}
		inFlight := m.Status.Phase != v1.MigrationPhaseUnset && m.Status.Phase != v1.MigrationPending
		if !inFlight {
			pod, _ := c.targetPod(m, vmi)
			inFlight = pod != nil || !c.exp.Satisfied(m.Namespace+"/"+m.Name)
		}
		if !inFlight {
			continue
		}
		running++
		if vmi.Status.NodeName == node || (vmi.Status.MigrationState != nil && vmi.Status.MigrationState.SourceNode == node) {
			outbound++
		}
	}
	return running, outbound
}

// checkPendingTimeout deletes a target pod pending for too long (KubeVirt's
// five minutes unschedulable, fifteen pending), which fails the migration.
func (c *Controller) checkPendingTimeout(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) error {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil || pod.CreationTimestamp.IsZero() {
		return nil
	}
	pending := c.now().Sub(pod.CreationTimestamp.Time)
	unschedulable, catchAll := annotatedTimeout(m, UnschedulableTimeoutAnnotation, c.unschedulable), annotatedTimeout(m, PendingTimeoutAnnotation, c.pending)
	wait := catchAll - pending
	if podUnschedulable(pod) {
		c.recorder.Eventf(m, corev1.EventTypeWarning, ReasonTargetPodUnschedulable, "Migration target pod for VMI [%s/%s] is currently unschedulable.", vmi.Namespace, vmi.Name)
		if pending >= unschedulable {
			return c.deletePod(ctx, key, m, pod, fmt.Sprintf("unschedulable pod %s/%s timeout period exceeded", pod.Namespace, pod.Name))
		}
		wait = min(wait, unschedulable-pending)
	}
	if pending >= catchAll {
		return c.deletePod(ctx, key, m, pod, fmt.Sprintf("pending pod %s/%s timeout period exceeded", pod.Namespace, pod.Name))
	}
	return reconcile.After(wait)
}

func annotatedTimeout(m *v1.VirtualMachineInstanceMigration, annotation string, def time.Duration) time.Duration {
	if s, ok := m.Annotations[annotation]; ok {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return time.Duration(n) * time.Second
		}
	}
	return def
}

// cancelBeforeHandoff deletes the target pod of a migration deleted before
// the node agents saw it.
func (c *Controller) cancelBeforeHandoff(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, pod *corev1.Pod) error {
	if pod == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	return c.deletePod(ctx, key, m, pod, fmt.Sprintf("migration canceled and pod %s/%s is deleted", pod.Namespace, pod.Name))
}

func (c *Controller) deletePod(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, pod *corev1.Pod, reason string) error {
	c.exp.ExpectDeletions(key, pod.UID)
	err := c.kube.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		c.exp.DeletionObserved(key, pod.UID)
		c.recorder.Eventf(m, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting migration target pod: %v", err)
		return fmt.Errorf("deleting target pod %s/%s of VirtualMachineInstanceMigration %s: %w", pod.Namespace, pod.Name, key, err)
	}
	if apierrors.IsNotFound(err) {
		c.exp.DeletionObserved(key, pod.UID)
	}
	klog.FromContext(ctx).Info("deleted migration target pod", "migration", key, "pod", pod.Name, "reason", reason)
	c.recorder.Event(m, corev1.EventTypeNormal, ReasonSuccessfulDelete, reason)
	return nil
}

// handOff writes the migration into the VMI's status.migrationState and
// labels the VMI with the target node: the node agents take it from there.
func (c *Controller) handOff(ctx context.Context, key string, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) error {
	if ms := vmi.Status.MigrationState; ms != nil && ms.MigrationUID == m.UID {
		return nil // handed off already
	}
	state := &v1.VirtualMachineInstanceMigrationState{
		MigrationUID:           m.UID,
		TargetNode:             pod.Spec.NodeName,
		TargetPod:              pod.Name,
		SourceNode:             vmi.Status.NodeName,
		SourcePod:              c.sourcePod(vmi),
		MigrationConfiguration: Configuration(c.kubevirts),
	}
	newLabels := map[string]string{}
	for k, v := range vmi.Labels {
		newLabels[k] = v
	}
	newLabels[v1.MigrationTargetNodeNameLabel] = pod.Spec.NodeName
	ops := []jsonpatch.Op{
		jsonpatch.Test("/status/migrationState", vmi.Status.MigrationState),
		jsonpatch.Add("/status/migrationState", state),
		jsonpatch.Test("/metadata/labels", nilIfEmpty(vmi.Labels)),
		jsonpatch.Add("/metadata/labels", newLabels),
	}
	if err := c.patchVMI(ctx, vmi, ops); err != nil {
		c.recorder.Eventf(m, corev1.EventTypeWarning, ReasonFailedHandOver, "Failed to set MigrationStat in VMI status. :%v", err)
		return fmt.Errorf("handing VirtualMachineInstanceMigration %s to the node agents: %w", key, err)
	}
	c.handedOff.Store(key, struct{}{})
	klog.FromContext(ctx).Info("handed the migration off to the node agents", "migration", key, "sourceNode", state.SourceNode, "targetNode", state.TargetNode)
	c.recorder.Event(m, corev1.EventTypeNormal, ReasonSuccessfulHandOver, "Migration target pod is ready for preparation by virt-handler.")
	return nil
}

// sourcePod is the name of the VMI's newest launcher pod on its node that
// has not exited: the pod the guest runs in.
func (c *Controller) sourcePod(vmi *v1.VirtualMachineInstance) string {
	pods, _ := podindex.Of(c.podIndexer, vmi)
	var src *corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == vmi.Status.NodeName && p.DeletionTimestamp == nil && !podDown(p) &&
			(src == nil || src.CreationTimestamp.Before(&p.CreationTimestamp)) {
			src = p
		}
	}
	if src == nil {
		return ""
	}
	return src.Name
}

// requestAbort sets status.migrationState.abortRequested: the source node
// agent aborts the migration and reports it failed.
func (c *Controller) requestAbort(ctx context.Context, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) error {
	if vmi.Status.MigrationState.AbortRequested {
		return nil
	}
	ops := []jsonpatch.Op{
		jsonpatch.Test("/status/migrationState/migrationUid", string(m.UID)),
		jsonpatch.Add("/status/migrationState/abortRequested", true),
	}
	if err := c.patchVMI(ctx, vmi, ops); err != nil {
		c.recorder.Eventf(m, corev1.EventTypeWarning, ReasonFailedAbort, "failed to set MigrationState in VMI status. :%v", err)
		return fmt.Errorf("requesting the abort of VirtualMachineInstanceMigration %s/%s: %w", m.Namespace, m.Name, err)
	}
	klog.FromContext(ctx).Info("asked the node agents to abort the migration", "migration", m.Namespace+"/"+m.Name)
	c.recorder.Event(m, corev1.EventTypeNormal, ReasonSuccessfulAbort, "Migration is ready to be canceled by virt-handler.")
	return nil
}

// markFailedOnVMI records on the VMI that the migration failed before the
// node agents could (KubeVirt's handleMarkMigrationFailedOnVMI).
func (c *Controller) markFailedOnVMI(ctx context.Context, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, reason string) error {
	now := metav1.NewTime(c.now().Truncate(time.Second))
	ms := vmi.Status.MigrationState
	ops := []jsonpatch.Op{
		jsonpatch.Test("/status/migrationState/migrationUid", string(m.UID)),
		jsonpatch.Add("/status/migrationState/failed", true),
		jsonpatch.Add("/status/migrationState/completed", true),
	}
	if ms.EndTimestamp == nil {
		ops = append(ops, jsonpatch.Add("/status/migrationState/endTimestamp", now))
	}
	if ms.StartTimestamp == nil {
		ops = append(ops, jsonpatch.Add("/status/migrationState/startTimestamp", now))
	}
	if ms.FailureReason == "" {
		ops = append(ops, jsonpatch.Add("/status/migrationState/failureReason", reason))
	}
	if err := c.patchVMI(ctx, vmi, ops); err != nil {
		return fmt.Errorf("marking VirtualMachineInstanceMigration %s/%s failed on its VMI: %w", m.Namespace, m.Name, err)
	}
	c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedMigration, "VirtualMachineInstance migration uid %s failed. reason: %s", m.UID, reason)
	return nil
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// patchVMI applies a JSON patch whose test operations guard against
// concurrent writers (the node agents, the VMI controller).
func (c *Controller) patchVMI(ctx context.Context, vmi *v1.VirtualMachineInstance, ops []jsonpatch.Op) error {
	raw, err := jsonpatch.Marshal(ops...)
	if err != nil {
		return err
	}
	_, err = c.client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.JSONPatchType, raw, metav1.PatchOptions{})
	return err
}

// nextStatus is the migration's status given the VMI and the target pod,
// and the events the change warrants (KubeVirt's updateStatus). It is pure.
func (c *Controller) nextStatus(m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, pod *corev1.Pod, handedOff bool) (v1.VirtualMachineInstanceMigrationStatus, []event) {
	s := *m.Status.DeepCopy()
	now := metav1.NewTime(c.now().Truncate(time.Second))
	var events []event
	fail := func(msg string) {
		enterPhase(&s, v1.MigrationFailed, now)
		events = append(events, event{corev1.EventTypeWarning, ReasonFailedMigration, msg})
	}
	abortRequested := func() {
		if !hasCondition(&s, v1.VirtualMachineInstanceMigrationAbortRequested) {
			s.Conditions = append(s.Conditions, v1.VirtualMachineInstanceMigrationCondition{
				Type: v1.VirtualMachineInstanceMigrationAbortRequested, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now,
			})
		}
	}
	var ms *v1.VirtualMachineInstanceMigrationState
	if vmi != nil {
		ms = vmi.Status.MigrationState
	}
	synced := ms != nil && ms.MigrationUID == m.UID
	handedOffPhase := m.Status.Phase != v1.MigrationPhaseUnset && m.Status.Phase != v1.MigrationPending &&
		m.Status.Phase != v1.MigrationScheduling && m.Status.Phase != v1.MigrationScheduled
	targetCreated := m.Status.Phase != v1.MigrationPhaseUnset && m.Status.Phase != v1.MigrationPending

	switch {
	case m.IsFinal():
		if synced {
			s.MigrationState = ms.DeepCopy()
		}
	case vmi == nil:
		fail("Migration failed because vmi does not exist.")
	case vmi.IsFinal():
		fail("Migration failed vmi shutdown during migration.")
	case m.DeletionTimestamp != nil && !handedOff:
		abortRequested()
		fail("Migration failed due to being canceled")
	case pod != nil && podDown(pod):
		fail("Migration failed because target pod shutdown during migration")
	case targetCreated && pod == nil:
		fail("Migration target pod was removed during active migration.")
	case handedOffPhase && ms == nil:
		fail("VMI's migration state was cleared during the active migration.")
	case handedOffPhase && ms.MigrationUID != m.UID:
		fail("VMI's migration state was taken over by another migration job during active migration.")
	case synced && ms.Failed:
		fail("source node reported migration failed")
	default:
		if m.DeletionTimestamp != nil {
			abortRequested()
		}
		c.advance(&s, m, vmi, pod, ms, synced, now, &events)
	}
	if synced && s.Phase != v1.MigrationSucceeded && s.Phase != v1.MigrationFailed {
		s.MigrationState = ms.DeepCopy()
	}
	return s, events
}

// advance moves the phase forward as far as the VMI and the target pod
// allow (KubeVirt takes one step per sync; the steps are the same).
func (c *Controller) advance(s *v1.VirtualMachineInstanceMigrationStatus, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, pod *corev1.Pod,
	ms *v1.VirtualMachineInstanceMigrationState, synced bool, now metav1.Time, events *[]event) {
	for {
		before := s.Phase
		switch s.Phase {
		case v1.MigrationPhaseUnset:
			switch cond := migratableCondition(vmi); {
			case !c.canMigrate(m, vmi):
				enterPhase(s, v1.MigrationFailed, now)
				*events = append(*events, event{corev1.EventTypeWarning, ReasonFailedMigration, "VMI is not eligible for migration because another migration job is in progress."})
			case cond != nil && cond.Status == corev1.ConditionFalse:
				enterPhase(s, v1.MigrationFailed, now)
				*events = append(*events, event{corev1.EventTypeWarning, ReasonFailedMigration,
					fmt.Sprintf("Cannot migrate VMI, Reason: %s, Message: %s", cond.Reason, cond.Message)})
			default:
				enterPhase(s, v1.MigrationPending, now)
			}
		case v1.MigrationPending:
			if cond := migratableCondition(vmi); cond != nil && cond.Status == corev1.ConditionFalse && pod == nil {
				enterPhase(s, v1.MigrationFailed, now)
				*events = append(*events, event{corev1.EventTypeWarning, ReasonFailedMigration,
					fmt.Sprintf("Cannot migrate VMI, Reason: %s, Message: %s", cond.Reason, cond.Message)})
			} else if pod != nil {
				enterPhase(s, v1.MigrationScheduling, now)
			}
		case v1.MigrationScheduling:
			if pod != nil && podReady(pod) {
				enterPhase(s, v1.MigrationScheduled, now)
			}
		case v1.MigrationScheduled:
			if synced && ms.TargetNode != "" {
				enterPhase(s, v1.MigrationPreparingTarget, now)
			}
		case v1.MigrationPreparingTarget:
			if synced && ms.TargetNode != "" && ms.TargetNodeAddress != "" {
				enterPhase(s, v1.MigrationTargetReady, now)
			}
		case v1.MigrationTargetReady:
			if synced && ms.StartTimestamp != nil {
				enterPhase(s, v1.MigrationRunning, now)
			}
		case v1.MigrationRunning:
			if synced && ms.Completed && !ms.Failed {
				enterPhase(s, v1.MigrationSucceeded, now)
				*events = append(*events, event{corev1.EventTypeNormal, ReasonSuccessfulMigration, "Source node reported migration succeeded"})
			}
		}
		if s.Phase == before || s.Phase == v1.MigrationSucceeded || s.Phase == v1.MigrationFailed {
			return
		}
	}
}

func enterPhase(s *v1.VirtualMachineInstanceMigrationStatus, p v1.VirtualMachineInstanceMigrationPhase, now metav1.Time) {
	if s.Phase == p {
		return
	}
	s.Phase = p
	s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
}

func hasCondition(s *v1.VirtualMachineInstanceMigrationStatus, t v1.VirtualMachineInstanceMigrationConditionType) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// podReady: the pod runs on a node and its compute container has started
// (KubeVirt's IsPodReady). It does not wait for the container to be ready:
// with a VMI's readiness probe, the target's compute container becomes
// ready only once the guest runs there.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "compute" {
			return cs.Ready || cs.State.Running != nil
		}
	}
	for _, cnd := range pod.Status.Conditions {
		if cnd.Type == corev1.PodReady {
			return cnd.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podDown: the pod exited (KubeVirt's PodIsDown).
func podDown(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func podUnschedulable(pod *corev1.Pod) bool {
	for _, cnd := range pod.Status.Conditions {
		if cnd.Type == corev1.PodScheduled && cnd.Status == corev1.ConditionFalse && cnd.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// syncMigratable keeps the VMI's LiveMigratable condition and
// status.migrationMethod while it is scheduled or running.
func (c *Controller) syncMigratable(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	vmi, err := c.vmis.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if vmi.DeletionTimestamp != nil || (vmi.Status.Phase != v1.Scheduled && vmi.Status.Phase != v1.Running) {
		return nil
	}
	cond, method := LiveMigratable(vmi, func(namespace, name string) *corev1.PersistentVolumeClaim {
		claim, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
		if err != nil {
			return nil
		}
		return claim
	})
	old := migratableCondition(vmi)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message && vmi.Status.MigrationMethod == method {
		return nil
	}
	now := metav1.NewTime(c.now().Truncate(time.Second))
	conds := make([]v1.VirtualMachineInstanceCondition, 0, len(vmi.Status.Conditions)+1)
	cond.LastProbeTime, cond.LastTransitionTime = now, now
	replaced := false
	for _, existing := range vmi.Status.Conditions {
		if existing.Type == v1.VirtualMachineInstanceIsMigratable {
			if existing.Status == cond.Status {
				cond.LastTransitionTime = existing.LastTransitionTime
			}
			conds = append(conds, cond)
			replaced = true
			continue
		}
		conds = append(conds, existing)
	}
	if !replaced {
		conds = append(conds, cond)
	}
	ops := []jsonpatch.Op{
		jsonpatch.Test("/metadata/resourceVersion", vmi.ResourceVersion),
		jsonpatch.Add("/status/conditions", conds),
		jsonpatch.Add("/status/migrationMethod", method),
	}
	if err := c.patchVMI(ctx, vmi, ops); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the LiveMigratable condition of VirtualMachineInstance %s: %w", key, err)
	}
	if cond.Status == corev1.ConditionFalse {
		klog.FromContext(ctx).V(2).Info("VMI cannot live-migrate", "vmi", key, "reason", cond.Reason, "message", cond.Message)
	}
	return nil
}
